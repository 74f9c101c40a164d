// Package jsonscan walks JSON text without decoding it. TopLevel finds the
// top-level fields of the JSON objects the API server sends (an object, a
// list, a watch event) and returns where each value is, so that a caller
// decodes only what it needs and keeps the rest as bytes; SkipSpace and
// SkipValue step over white space and whole values for callers that walk
// JSON themselves. It never modifies the data it scans, and it checks only
// what it must to find the end of a value (see SkipValue): the decoder of
// what a caller keeps checks the rest. encoding/json cannot do this: its
// Decoder finds a field only by reading every token before it, each
// string and number as a new value.
//
// It is the one JSON scanner of metactl, shared by the cache's objects
// (pkg/dynamic/informer), the object client's decoders
// (pkg/dynamic/objectclient) and the hook protocol's check of the length
// of an answer's lists (pkg/hooks), and imports nothing of metactl.
package jsonscan
