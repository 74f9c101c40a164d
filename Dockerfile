# syntax=docker/dockerfile:1
#
# metactl's image: a static binary on distroless, running as non-root
# (65532, "nonroot"). Build from the repository root:
#
#   docker build -t <registry>/metactl:<tag> --build-arg VERSION=<tag> \
#     --build-arg COMMIT=$(git rev-parse --short=12 HEAD) .
#
# (the build context holds no .git, so `metactl version` knows the commit
# only from COMMIT).
#
# manifests/deploy/deployment.yaml runs it as `/metactl run ...`.

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /metactl ./cmd/metactl

FROM gcr.io/distroless/static:nonroot
COPY --from=build /metactl /metactl
USER 65532:65532
ENTRYPOINT ["/metactl"]
CMD ["run"]
