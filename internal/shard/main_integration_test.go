//go:build integration

package shard

import (
	"testing"

	"github.com/metactl/metactl/internal/testenv"
)

var env *testenv.Environment

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }
