//go:build integration

package gateoff

import (
	"testing"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/test/sharding/internal/shardtest"
)

var env *testenv.Environment

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{
		ExtraCRDPaths: []string{shardtest.CRDPath},
	}, &env)
}

// The scenarios whose informers list again as buckets move, which is where
// metactl's own filtering (mode client) differs from the API server's.
// Roll's handover is TwoFourThree's last step, and a cluster-scoped
// parent's informers are never filtered: gateon runs those two, so that
// the two packages, which go test runs side by side, take less time.

func TestOneTwoFour(t *testing.T)   { shardtest.OneTwoFour(t, env, shardtest.FilterClient) }
func TestKill(t *testing.T)         { shardtest.Kill(t, env) }
func TestTwoFourThree(t *testing.T) { shardtest.TwoFourThree(t, env) }
