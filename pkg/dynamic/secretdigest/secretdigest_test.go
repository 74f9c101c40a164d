package secretdigest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSaltedDiffersBetweenProcesses: a salted digest is the same for the
// same value within a process, differs from the unsalted one, and differs
// from the salted digest another process (this test binary run again)
// makes of the same value: a recording's digests cannot be compared across
// processes, nor checked against a guessed value.
func TestSaltedDiffersBetweenProcesses(t *testing.T) {
	if os.Getenv("SECRETDIGEST_PRINT_SALTED") != "" {
		os.Stdout.WriteString("salted=" + Salted("hunter2") + "\n")
		return
	}
	here := Salted("hunter2")
	if here != Salted("hunter2") || !IsSalted(here) || IsDigest(here) {
		t.Fatalf("Salted(hunter2) = %q, not stable within the process or not a salted digest", here)
	}
	if strings.TrimPrefix(here, SaltedPrefix) == strings.TrimPrefix(Of("hunter2"), Prefix) {
		t.Errorf("the salted digest is the unsalted one: %s", here)
	}
	if Salted("hunter3") == here {
		t.Error("two values have one salted digest")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSaltedDiffersBetweenProcesses$")
	cmd.Env = append(os.Environ(), "SECRETDIGEST_PRINT_SALTED=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	_, other, ok := strings.Cut(string(out), "salted=")
	other, _, _ = strings.Cut(other, "\n")
	if !ok || !IsSalted(other) {
		t.Fatalf("the other process printed %q", out)
	}
	if other == here {
		t.Errorf("another process made the same salted digest of the same value: %s", other)
	}
}

// TestSaltedValuesKeepsDigests: SaltedValues replaces each value by its
// salted digest and keeps those that are digests already.
func TestSaltedValuesKeepsDigests(t *testing.T) {
	unsalted, salted := Of("a"), Salted("b")
	got := SaltedValues(map[string]any{"plain": "c", "unsalted": unsalted, "salted": salted})
	if got["plain"] != Salted("c") || got["unsalted"] != unsalted || got["salted"] != salted {
		t.Errorf("SaltedValues = %v", got)
	}
}
