// Package hookrecord is the format of a recorded set of hook calls: the
// requests a controller's hooks were sent and what they answered, as
// `metactl run` records them for a controller that opts in, `metactl
// record fetch` and `metactl dev` write them, and `metactl replay` sends
// them again to a hook to compare its answers with the recorded ones.
//
// A recorded set is a directory holding one JSON file per call (a Call),
// named by its place in the order of the calls and its hook
// ("0001-sync.json"); ReadDir reads them back in that order, ignoring
// other files, so a user may keep a README or delete calls by hand.
//
// The Recorder (recorder.go) is what records: the hookclient.Tap of metactl's
// hook client, it keeps the calls of the controllers that opt in
// (Annotation), the newest of each within its bounds, with the data of
// Secrets replaced by digests (DigestSecrets) and the credentials of the
// URLs in the controller object redacted, and, under `--record-dir` (for
// development), writes each call into a directory as it happens. Handler serves a
// controller's calls at Path on metactl's metrics address, which `metactl
// run` guards (internal/debugauth) with Attributes: only a caller who may
// list the controller's parent and child resources in all namespaces
// reads them; Fetch and FetchThroughPods read them for `metactl record
// fetch`.
package hookrecord
