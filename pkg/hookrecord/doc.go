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
package hookrecord
