//go:build integration

package gateon

import (
	"testing"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/test/sharding/internal/shardtest"
)

var env *testenv.Environment

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{
		ExtraCRDPaths:  []string{shardtest.CRDPath},
		APIServerFlags: map[string]string{"feature-gates": "ShardedListAndWatch=true"},
	}, &env)
}

func TestOneTwoFour(t *testing.T)    { shardtest.OneTwoFour(t, env, shardtest.FilterServer) }
func TestKill(t *testing.T)          { shardtest.Kill(t, env) }
func TestRoll(t *testing.T)          { shardtest.Roll(t, env) }
func TestTwoFourThree(t *testing.T)  { shardtest.TwoFourThree(t, env) }
func TestClusterScoped(t *testing.T) { shardtest.ClusterScoped(t, env) }
