// Package replay sends the requests of a recorded set of hook calls
// (internal/hookrecord) to a hook again, usually a new version of it, and
// compares each answer with the recorded one: a regression test for a
// hook written in any language, which `metactl replay` runs.
//
// Answers compare as JSON values (internal/jsondiff), not as text: the
// order of keys does not matter, numbers compare by value, and the lists
// of objects that are sets in the protocol (a composite answer's
// children, a decorator answer's attachments) compare by object
// (apiVersion, kind, namespace and name), whatever their order. A
// Secret's data in the new answer is replaced by its digest before the
// comparison, as it is in the recorded answer; digests are salted per
// process (secretdigest.Salted), so a Secret's values compare by their
// keys only.
//
// Bounds: calls are made one at a time, each bounded by Options.Timeout
// and its answer by hookclient.DefaultMaxResponseBytes; nothing but the hook
// is contacted, and nothing is written unless Options.Update is set.
package replay
