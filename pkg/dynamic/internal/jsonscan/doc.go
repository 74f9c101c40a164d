// Package jsonscan finds the top-level fields of the JSON objects the API
// server sends (an object, a list, a watch event) without decoding them: it
// returns where each value is, so that a caller decodes only what it needs
// and keeps the rest as bytes. It never modifies the data it scans.
//
// It is shared by the cache's objects (pkg/dynamic/informer) and the object
// client's decoders (pkg/dynamic/objectclient), and imports nothing of
// metactl.
package jsonscan
