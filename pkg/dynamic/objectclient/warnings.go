package objectclient

import (
	"context"

	"k8s.io/client-go/rest"
)

// WriteOption is an option of one write: Create, Update, Apply or Delete.
type WriteOption func(*writeOptions)

// writeOptions are the options of one write.
type writeOptions struct {
	// warnings, when set, is handed the write's warnings.
	warnings warningFunc
}

// Warnings returns a WriteOption under which the write hands each warning
// the API server returns (an unknown or duplicate field, a deprecated API,
// ...) to handle, instead of logging it as client-go does by default. It
// attributes a warning to the write that caused it: the handler is called
// during that write's call, before it returns. The handler is set on the
// write's own rest.Request (rest.Request.WarningHandlerWithContext), so
// no other request is affected.
func Warnings(handle func(text string)) WriteOption {
	return func(o *writeOptions) { o.warnings = warningFunc(handle) }
}

// writeOptionsOf returns the options opts set.
func writeOptionsOf(opts []WriteOption) writeOptions {
	var o writeOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// apply sets, on req, what o asks: its warning handler.
func (o writeOptions) apply(req *rest.Request) *rest.Request {
	if o.warnings != nil {
		return req.WarningHandlerWithContext(o.warnings)
	}
	return req
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
