// Package plan tests `metactl plan`, the binary built from this tree run
// as a separate process, against a real API server that keeps an audit
// log, so that "plan writes nothing" is counted where writes would land.
package plan
