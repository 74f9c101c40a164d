package objectclient

import (
	"context"

	"k8s.io/client-go/rest"
)

// warningsKey is the context key of WithWarnings' handler: the one value
// of a write that the Client's write methods take from the context rather
// than a parameter, so that a caller that wants a write's warnings
// (children.Writer) gets them without every other caller passing a nil
// handler. withWarnings moves it onto the request, where client-go wants
// a handler (rest.Request.WarningHandlerWithContext).
type warningsKey struct{}

// WithWarnings returns a context under which the Client's writes
// (Create, Update, Patch, Delete) hand each warning the API server returns
// (an unknown or duplicate field, a deprecated API, ...) to handle, instead
// of logging it as client-go does by default. It attributes a warning to
// the write that caused it: the handler is called during that write's
// call, before it returns. Other requests are unaffected.
func WithWarnings(ctx context.Context, handle func(text string)) context.Context {
	return context.WithValue(ctx, warningsKey{}, warningFunc(handle))
}

// warningFunc is a rest.WarningHandlerWithContext that hands the text of
// each warning to a function.
type warningFunc func(text string)

func (f warningFunc) HandleWarningHeaderWithContext(_ context.Context, code int, _ string, text string) {
	// 299 is the code of the API server's warnings; client-go's own
	// handlers ignore any other too.
	if code == 299 && text != "" {
		f(text)
	}
}

// withWarnings sets, on a request made under WithWarnings, its handler.
func withWarnings(ctx context.Context, req *rest.Request) *rest.Request {
	if h, ok := ctx.Value(warningsKey{}).(warningFunc); ok {
		return req.WarningHandlerWithContext(h)
	}
	return req
}
