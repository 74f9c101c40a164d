/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"github.com/metactl/metactl/internal/hookfixture"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// The fixtures below are those of pkg/hooks's and pkg/hooks/credentials's
// tests that the tests of the client use too.

const (
	loose  = v1alpha1.ResponseUnMarshallModeLoose
	strict = v1alpha1.ResponseUnMarshallModeStrict
)

const childCM = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`

var newObject = hookfixture.NewObject

var sampleController = hookfixture.Controller

func hookWith(url string, configure func(w *v1alpha1.Webhook)) *v1alpha1.Hook {
	h := urlHook(url)
	if configure != nil {
		configure(h.Webhook)
	}
	return h
}
