package informer

import "testing"

// TestOwnManagedFields: only the entries of metactl's field managers are
// kept, and only theirs are decoded: another manager's entry that would
// not decode as an entry (a field of the wrong type) is skipped, not a
// reason to keep none.
func TestOwnManagedFields(t *testing.T) {
	data := []byte(`[
		{"manager":"kubectl","operation":"Update","apiVersion":"v1","time":42},
		{"manager":"metactl/web","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{}}},
		{"manager":"metactl","operation":"Update","apiVersion":"v1"}
	]`)
	own := ownManagedFields(data)
	if len(own) != 1 || own[0].Manager != "metactl/web" || own[0].FieldsV1 == nil {
		t.Fatalf("ownManagedFields = %+v, want metactl/web's entry with its fields", own)
	}
	if got := ownManagedFields([]byte(`[{"manager":"kubectl"}]`)); got != nil {
		t.Errorf("ownManagedFields without metactl's entry = %+v, want nil", got)
	}
}
