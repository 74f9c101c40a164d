package objectclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/metactl/metactl/internal/jsonscan"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// decodeListStream reads a list response from r as a stream, item by item
// into an informer.ListBuilder that keeps the items keep accepts: what it
// holds at any time is the items kept and the one being read, not the
// whole response. It checks the response's syntax as encoding/json does
// (the syntax, not the types, of the fields it skips).
func decodeListStream(r io.Reader, keep func(namespace string) bool) (*informer.ObjectList, error) {
	dec := json.NewDecoder(r)
	b := informer.NewListBuilder(keep)
	if err := delim(dec, '{'); err != nil {
		return nil, err
	}
	var apiVersion, kind string
	var raw json.RawMessage // reused: Decode appends into it
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		if key == "items" {
			if err := items(dec, b, &raw); err != nil {
				return nil, err
			}
			continue
		}
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		switch key {
		case "apiVersion":
			apiVersion, _ = jsonscan.PlainString(raw)
		case "kind":
			kind, _ = jsonscan.PlainString(raw)
		case "metadata":
			if err := b.SetListMeta(raw); err != nil {
				return nil, err
			}
		}
	}
	if err := delim(dec, '}'); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the list")
	}
	b.SetType(apiVersion, kind)
	return b.List(), nil
}

// items reads the value of a list's items (an array, or null) into b.
func items(dec *json.Decoder, b *informer.ListBuilder, raw *json.RawMessage) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil { // null
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return errors.New("items: not a JSON array")
	}
	for dec.More() {
		if err := dec.Decode(raw); err != nil {
			return fmt.Errorf("items: %w", err)
		}
		if err := b.Add(*raw); err != nil {
			return err
		}
	}
	return delim(dec, ']')
}

func delim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("want %q, found %v", want, tok)
	}
	return nil
}
