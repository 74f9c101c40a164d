package controller

import (
	"testing"

	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/hooks"
)

// TestAnswerObjectLimitsAgree: decoding an answer refuses more objects
// than the children checks would (one limit, kept in two packages that do
// not import each other).
func TestAnswerObjectLimitsAgree(t *testing.T) {
	if hooks.MaxObjects != children.MaxObjects {
		t.Errorf("hooks.MaxObjects = %d, children.MaxObjects = %d: want one limit", hooks.MaxObjects, children.MaxObjects)
	}
}
