// Package controller holds what every kind of metactl controller
// (pkg/composite, pkg/decorator) shares with the process that runs it:
// the Options it is built with, the error for an invalid spec, and the
// bookkeeping of their informers (Watches), hook calls (HookCaller) and
// failing objects (Failing).
package controller

import (
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
	"github.com/metactl/metactl/pkg/hooks"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

// Options are what a controller needs from the process around it; the
// first five are shared by every controller of a process.
type Options struct {
	// Client makes every uncached read and the writes Objects does not.
	Client dynamic.Interface
	// Objects creates, updates and deletes children.
	Objects *objectclient.Client
	// Resources maps the controller's resources.
	Resources *discovery.ResourceMap
	// Informers shares watches among controllers.
	Informers *informer.Factory
	// Hooks calls the webhooks.
	Hooks *hooks.Client
	// Recorder records Events on the objects the controller syncs.
	Recorder record.EventRecorder
	// Workers is the number of objects synced at once; default 32.
	Workers int
	// OnHealthChange, when set, is called when the hooks start or stop
	// failing for their credentials.
	OnHealthChange func()
	// RateLimiter spaces the retries of failing objects; default
	// loop.DefaultRateLimiter().
	RateLimiter workqueue.TypedRateLimiter[string]
}

// InvalidSpecError reports a controller object whose spec is invalid.
type InvalidSpecError struct{ Errs field.ErrorList }

func (e *InvalidSpecError) Error() string { return e.Errs.ToAggregate().Error() }
