/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package credentials

import (
	"github.com/metactl/metactl/internal/hookfixture"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
)

// The fixtures below are those of pkg/hooks/hookclient's tests that the
// tests of credentials use too.

var urlHook = hookfixture.URLHook

var serve = hookfixture.Serve

var answer = hookfixture.Answer

func sampleCompositeRequest(version v1alpha1.HookVersion) *hooks.CompositeSyncRequest {
	parent := newObject("ctl.example.com/v1", "Thing", "ns", "p")
	parent.Object["spec"] = map[string]any{"replicas": int64(2)}
	children := hooks.NewObjectMap()
	children.EnsureKey("v1", "ConfigMap")
	children.EnsureKey("v1", "Pod")
	children.Insert(version, true, newObject("v1", "ConfigMap", "ns", "name-a"))
	related := hooks.NewObjectMap()
	related.Insert(version, true, newObject("ctl.example.com/v1", "Thing", "ns", "other"))
	return &hooks.CompositeSyncRequest{Controller: sampleController(), Parent: parent, Children: children, Related: related}
}

var statusAnswer = hookfixture.StatusAnswer

var newObject = hookfixture.NewObject

var sampleController = hookfixture.Controller
