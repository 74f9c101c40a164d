// Package children writes a controller's children (a CompositeController's
// children, a DecoratorController's attachments): given the observed and the
// desired objects of each declared resource, it creates what is missing,
// deletes what is no longer desired, and updates the rest as the resource's
// update strategy says, with the three-way merge of pkg/dynamic/apply or,
// with Writer.ServerSide, with server-side apply as the controller's field
// manager (apply.ServerSide decides when an apply is needed).
// Before that, Declared.Desired checks what a hook asked for against the
// controller's declared resources, the whole answer before anything is
// written, and makes the objects ready to write. Set keys an object by
// Key, namespace/name as client-go's cache keys it.
//
// Writes of one call run concurrently (up to Writer.Concurrency at a time,
// and at most MaxWritesInFlight in the whole process, over every call of
// every controller); their order is not defined. A failed write does not
// stop the others; all failures are returned joined. Nothing is written for an object whose
// desired state equals its observed state. Deletes carry the observed UID
// as a precondition and propagate in the background. As in metacontroller,
// three answers of the server are no failure: a create that finds the name
// taken writes nothing, a delete that finds the child gone (or replaced)
// counts as deleted, and an update that finds it gone leaves it out of the
// observed children, for the next call to create again.
//
// What the parent's user should know and would otherwise not see, the API
// server's warnings on a write and a change the update strategy OnDelete
// does not make, becomes an Event on the parent, once for a while (see
// Writer.Recorder).
package children
