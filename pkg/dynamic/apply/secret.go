package apply

import (
	"encoding/base64"

	"github.com/metactl/metactl/internal/redact"
	"github.com/metactl/metactl/pkg/dynamic/secretdigest"
)

// normalizeSecret turns a Secret's write-only stringData into data, as the
// API server does, so that what is desired compares with what is observed
// (the server never returns stringData). Other objects are returned as
// they are. want's top level is modified; nothing below it is.
func normalizeSecret(want map[string]any) map[string]any {
	if !redact.IsSecret(want) {
		return want
	}
	stringData, ok := want["stringData"].(map[string]any)
	if !ok {
		return want
	}
	existing, _ := want["data"].(map[string]any)
	data := make(map[string]any, len(existing)+len(stringData))
	for k, v := range existing {
		data[k] = v
	}
	for k, v := range stringData {
		if s, ok := v.(string); ok {
			data[k] = base64.StdEncoding.EncodeToString([]byte(s))
		}
	}
	want["data"] = data
	delete(want, "stringData")
	return want
}

// recorded returns want with, for a Secret, each data value replaced by
// its digest (secretdigest.Values), so the annotation holds no second copy
// of the secret while still naming every key (which is all the merge needs
// of it). Other objects are returned as they are. want is not modified.
func recorded(want map[string]any) map[string]any {
	if !redact.IsSecret(want) {
		return want
	}
	data, ok := want["data"].(map[string]any)
	if !ok {
		return want
	}
	out := make(map[string]any, len(want))
	for k, v := range want {
		out[k] = v
	}
	out["data"] = secretdigest.Values(data)
	return out
}
