package objectclient

import (
	"errors"
	"fmt"
	"io"

	"github.com/metactl/metactl/internal/jsonscan"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// decodeListStream reads a list response from r as a stream, item by item
// into an informer.ListBuilder that keeps the items keep accepts: what it
// holds at any time is the items kept and a buffer of the response around
// the item being read (readChunk, or one item when larger), not the whole
// response. It checks what informer.NewObjectListKeeping checks of a
// whole response (the top level's syntax, and of each item what
// jsonscan.SkipValue checks), and builds the same list.
func decodeListStream(r io.Reader, keep func(namespace string) bool) (*informer.ObjectList, error) {
	s := &streamScanner{r: r}
	b := informer.NewListBuilder(keep)
	if err := s.want('{'); err != nil {
		return nil, err
	}
	var apiVersion, kind string
	for first := true; ; first = false {
		c, err := s.peek()
		if err != nil {
			return nil, err
		}
		if first && c == '}' {
			s.pos++
			break
		}
		v, err := s.value()
		if err != nil {
			return nil, err
		}
		key, ok := jsonscan.PlainString(v)
		if !ok && (len(v) == 0 || v[0] != '"') {
			return nil, fmt.Errorf("want a key, found %.20q", v)
		}
		if err := s.want(':'); err != nil {
			return nil, err
		}
		if key == "items" {
			if err := s.items(b); err != nil {
				return nil, err
			}
		} else {
			v, err := s.value()
			if err != nil {
				return nil, err
			}
			switch key {
			case "apiVersion":
				apiVersion, _ = jsonscan.PlainString(v)
			case "kind":
				kind, _ = jsonscan.PlainString(v)
			case "metadata":
				if err := b.SetListMeta(v); err != nil {
					return nil, err
				}
			}
		}
		if c, err = s.peek(); err != nil {
			return nil, err
		}
		s.pos++
		if c == '}' {
			break
		}
		if c != ',' {
			return nil, fmt.Errorf("want ',' or '}', found %q", c)
		}
	}
	if _, err := s.peek(); !errors.Is(err, io.ErrUnexpectedEOF) {
		if err == nil {
			err = errors.New("data after the list")
		}
		return nil, err
	}
	b.SetType(apiVersion, kind)
	return b.List(), nil
}

// readChunk is how much of a response streamScanner asks for at a time.
const readChunk = 64 << 10

// streamScanner walks JSON read from r, holding only what it has not
// consumed yet: buf[pos:].
type streamScanner struct {
	r   io.Reader
	buf []byte
	pos int
	eof bool
}

// fill reads more of r after buf[pos:], which it moves to the start of
// buf, growing buf when less than readChunk is free; false at the end of
// r.
func (s *streamScanner) fill() (bool, error) {
	if s.eof {
		return false, nil
	}
	n := copy(s.buf, s.buf[s.pos:])
	s.buf, s.pos = s.buf[:n], 0
	if free := cap(s.buf) - n; free < readChunk {
		grown := make([]byte, n, n+max(readChunk, n))
		copy(grown, s.buf)
		s.buf = grown
	}
	read, err := io.ReadFull(s.r, s.buf[n:cap(s.buf)])
	s.buf = s.buf[:n+read]
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		s.eof = true
		return read > 0, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// peek returns the next byte that is not white space, without consuming
// it; io.ErrUnexpectedEOF at the end of r.
func (s *streamScanner) peek() (byte, error) {
	for {
		s.pos = jsonscan.SkipSpace(s.buf, s.pos)
		if s.pos < len(s.buf) {
			return s.buf[s.pos], nil
		}
		more, err := s.fill()
		if err != nil {
			return 0, err
		}
		if !more {
			return 0, io.ErrUnexpectedEOF
		}
	}
}

// want consumes the next byte that is not white space, which must be c.
func (s *streamScanner) want(c byte) error {
	got, err := s.peek()
	if err != nil {
		return err
	}
	if got != c {
		return fmt.Errorf("want %q, found %q", c, got)
	}
	s.pos++
	return nil
}

// value consumes the next JSON value and returns it, valid until the next
// call: a value at the end of buf that may go on (an error of SkipValue,
// or a number or literal ending with buf) is read again once buf is
// filled.
func (s *streamScanner) value() ([]byte, error) {
	if _, err := s.peek(); err != nil {
		return nil, err
	}
	for {
		end, err := jsonscan.SkipValue(s.buf, s.pos)
		if err == nil && (end < len(s.buf) || s.eof) {
			v := s.buf[s.pos:end]
			s.pos = end
			return v, nil
		}
		more, ferr := s.fill()
		if ferr != nil {
			return nil, ferr
		}
		if !more {
			if err == nil {
				continue // s.eof is set now: the value ends with r
			}
			return nil, err
		}
	}
}

// items reads the value of a list's items (an array, or null) into b.
func (s *streamScanner) items(b *informer.ListBuilder) error {
	c, err := s.peek()
	if err != nil {
		return err
	}
	if c == 'n' {
		v, err := s.value()
		if err != nil {
			return err
		}
		if string(v) != "null" {
			return errors.New("items: not a JSON array")
		}
		return nil
	}
	if c != '[' {
		return errors.New("items: not a JSON array")
	}
	s.pos++
	for {
		if c, err = s.peek(); err != nil {
			return fmt.Errorf("items: %w", err)
		}
		if c == ']' {
			s.pos++
			return nil
		}
		v, err := s.value()
		if err != nil {
			return fmt.Errorf("items: %w", err)
		}
		if err := b.Add(v); err != nil {
			return err
		}
		if c, err = s.peek(); err != nil {
			return fmt.Errorf("items: %w", err)
		}
		if c == ',' {
			s.pos++
		}
	}
}
