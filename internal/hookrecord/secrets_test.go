package hookrecord

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/metactl/metactl/pkg/dynamic/secretdigest"
)

// secretValue is the value every Secret of the tests holds.
const secretValue = "hunter2-s3cr3t"

// secretDocument is a hook request with a Secret wherever one may sit:
// the parent (a decorator's), a child (v1 and v2 maps), a related object,
// with kubectl's last-applied annotation, and an answer's children list.
func secretDocument() string {
	b64 := base64.StdEncoding.EncodeToString([]byte(secretValue))
	secret := func(name string) string {
		return `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"` + name + `","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"stringData\":{\"k\":\"` + secretValue + `\"}}","other":"kept"}},"data":{"k":"` + b64 + `"},"stringData":{"s":"` + secretValue + `"}}`
	}
	return `{"controller":{"kind":"CompositeController"},"parent":` + secret("parent") +
		`,"children":{"Secret.v1":{"a":` + secret("a") + `}},"related":{"Secret.v1":{"ns/b":` + secret("b") + `}},` +
		`"answer":{"children":[` + secret("c") + `,{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"` + secretValue + `"}}]},"big":12345678901234567890}`
}

func TestDigestSecretsLeavesNoSecretValue(t *testing.T) {
	doc := secretDocument()
	out, err := DigestSecrets([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	// The ConfigMap keeps its value: it is not a Secret.
	if strings.Count(s, secretValue) != 1 || !strings.Contains(s, `"data":{"k":"`+secretValue+`"},"kind":"ConfigMap"`) {
		t.Errorf("a Secret value survives, or the ConfigMap's does not:\n%s", s)
	}
	if strings.Contains(s, base64.StdEncoding.EncodeToString([]byte(secretValue))) {
		t.Errorf("a Secret value survives in base64:\n%s", s)
	}
	if !strings.Contains(s, `"big":12345678901234567890`) || !strings.Contains(s, `"other":"kept"`) {
		t.Errorf("other values changed:\n%s", s)
	}
	var doc2 map[string]any
	if err := json.Unmarshal(out, &doc2); err != nil {
		t.Fatal(err)
	}
	data := doc2["parent"].(map[string]any)["data"].(map[string]any)
	if d, _ := data["k"].(string); !secretdigest.IsSalted(d) || d != secretdigest.Salted(base64.StdEncoding.EncodeToString([]byte(secretValue))) {
		t.Errorf("the parent's data.k = %q, want the salted digest of its base64", d)
	}
	// No digest anyone could compute from a guess (the unsalted one).
	for _, v := range []string{secretValue, base64.StdEncoding.EncodeToString([]byte(secretValue))} {
		if strings.Contains(s, secretdigest.Of(v)[len(secretdigest.Prefix):]) {
			t.Errorf("the unsalted digest of %q is in the recording:\n%s", v, s)
		}
	}
	// Digests are kept as they are: recording a recorded body changes nothing.
	again, err := DigestSecrets(out)
	if err != nil || string(again) != s {
		t.Errorf("digesting again changed the body: %v\n%s", err, again)
	}
	// A body without Secrets comes back as it is, byte for byte.
	plain := []byte(`{ "parent": {"kind":"Thing"} }`)
	if got, err := DigestSecrets(plain); err != nil || string(got) != string(plain) {
		t.Errorf("a body without Secrets = %s, %v", got, err)
	}
	if _, err := DigestSecrets([]byte(`{"data":`)); err == nil {
		t.Error("a body that is not JSON was accepted")
	}
}
