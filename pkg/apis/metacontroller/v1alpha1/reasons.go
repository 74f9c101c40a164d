package v1alpha1

// Reasons of the Ready condition (ConditionReady) of a CompositeController
// or DecoratorController; each but ReasonRunning and ReasonHookAuthError
// is also the reason of a Warning Event on it. metactl's manager adds a
// few of its own (internal/manager's reasons.go).
const (
	// ReasonRunning: the controller runs (Ready True).
	ReasonRunning = "Running"
	// ReasonInvalidSpec: the controller's spec or annotations are refused:
	// it does not start.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonUnknownResource: a resource the controller names is not
	// served; it starts by itself once it is.
	ReasonUnknownResource = "UnknownResource"
	// ReasonHookAuthError: the controller runs, but its last hook call
	// failed for the hook's credentials (a missing Secret, a malformed CA
	// bundle, an empty token, ...).
	ReasonHookAuthError = "HookAuthError"
	// ReasonForbidden: metactl, or the ServiceAccount the controller acts
	// as, lacks a permission the controller needs: it does not start, or
	// is stopped when the account loses one.
	ReasonForbidden = "Forbidden"
	// ReasonCredentialNotAllowed (ours): a hook's credentials are in a
	// Secret or ConfigMap in a namespace metactl does not allow
	// (--credential-namespaces): the controller does not start.
	ReasonCredentialNotAllowed = "CredentialNotAllowed"
	// ReasonInsecureCredentials (ours): a hook with credentials is called
	// over plain http (see --allow-insecure-credentials): the controller
	// does not start.
	ReasonInsecureCredentials = "InsecureCredentials"
)

// Reasons of the Synced condition (ConditionSynced) of a running
// controller.
const (
	// ReasonAllSynced: the last sync of every object of the controller
	// succeeded (Synced True).
	ReasonAllSynced = "AllSynced"
	// ReasonSyncErrors: the last sync of some objects failed (Synced
	// False, the message names them).
	ReasonSyncErrors = "SyncErrors"
)
