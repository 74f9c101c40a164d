/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// encoder writes JSON straight into a buffer. The values found in
// unstructured objects (maps, slices, strings, numbers, booleans, null) are
// written directly, which avoids what json.Marshal costs for them: the
// json.Marshaler round trip of unstructured.Unstructured (a buffer per
// object, then a re-scan to compact it) and reflection with a fresh key
// slice per map. Values of any other type go through encoding/json. The
// output is byte for byte what json.Marshal produces for the same value
// (sorted map keys, HTML-safe escaping).
type encoder struct {
	buf *bytes.Buffer
	enc *json.Encoder
	// keys is a stack of map keys being sorted, shared by nested maps.
	keys  []string
	depth int
}

func newEncoder(buf *bytes.Buffer) *encoder {
	return &encoder{buf: buf, enc: json.NewEncoder(buf)}
}

// maxDirectDepth is how deeply nested values are written directly; deeper
// ones go to encoding/json, which detects cycles.
const maxDirectDepth = 500

// value writes v as json.Marshal would.
func (e *encoder) value(v any) error {
	switch v := v.(type) {
	case nil:
		e.buf.WriteString("null")
	case string:
		e.string(v)
	case bool:
		e.bool(v)
	case int64:
		e.buf.Write(strconv.AppendInt(e.buf.AvailableBuffer(), v, 10))
	case int:
		e.buf.Write(strconv.AppendInt(e.buf.AvailableBuffer(), int64(v), 10))
	case int32:
		e.buf.Write(strconv.AppendInt(e.buf.AvailableBuffer(), int64(v), 10))
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return e.std(v) // encoding/json's error
		}
		e.buf.Write(appendFloat(e.buf.AvailableBuffer(), v))
	case map[string]any:
		if e.depth >= maxDirectDepth {
			return e.std(v)
		}
		return e.mapValue(v)
	case []any:
		if e.depth >= maxDirectDepth {
			return e.std(v)
		}
		return e.sliceValue(v)
	default:
		return e.std(v)
	}
	return nil
}

func (e *encoder) mapValue(m map[string]any) error {
	if m == nil {
		e.buf.WriteString("null")
		return nil
	}
	e.depth++
	start, end := pushSortedKeys(e, m)
	e.buf.WriteByte('{')
	for i := start; i < end; i++ {
		if i > start {
			e.buf.WriteByte(',')
		}
		k := e.keys[i]
		e.string(k)
		e.buf.WriteByte(':')
		if err := e.value(m[k]); err != nil {
			return err
		}
	}
	e.buf.WriteByte('}')
	e.popKeys(start, end)
	e.depth--
	return nil
}

// pushSortedKeys pushes the keys of m, sorted, on the key stack and
// returns where they are: e.keys[start:end]. Values encoded meanwhile push
// their keys above end and may move the stack, so read it by index.
func pushSortedKeys[V any](e *encoder, m map[string]V) (start, end int) {
	start = len(e.keys)
	for k := range m {
		e.keys = append(e.keys, k)
	}
	end = len(e.keys)
	slices.Sort(e.keys[start:end])
	return start, end
}

// popKeys removes e.keys[start:end], the top of the key stack.
func (e *encoder) popKeys(start, end int) {
	clear(e.keys[start:end]) // keep no strings alive in the pool
	e.keys = e.keys[:start]
}

func (e *encoder) sliceValue(s []any) error {
	if s == nil {
		e.buf.WriteString("null")
		return nil
	}
	e.depth++
	e.buf.WriteByte('[')
	for i, v := range s {
		if i > 0 {
			e.buf.WriteByte(',')
		}
		if err := e.value(v); err != nil {
			return err
		}
	}
	e.buf.WriteByte(']')
	e.depth--
	return nil
}

// std writes v with encoding/json.
func (e *encoder) std(v any) error {
	if err := e.enc.Encode(v); err != nil {
		return err
	}
	// json.Encoder terminates every value with a newline.
	e.buf.Truncate(e.buf.Len() - 1)
	return nil
}

// object writes u as json.Marshal(u) would.
func (e *encoder) object(u *unstructured.Unstructured) error {
	if u == nil {
		e.buf.WriteString("null")
		return nil
	}
	return e.value(u.Object)
}

// string writes s as a JSON string.
func (e *encoder) string(s string) {
	e.buf.Write(appendString(e.buf.AvailableBuffer(), s))
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it by default: quote, backslash and control characters; <, > and
// & (so the output is safe inside HTML); U+2028 and U+2029 (so it is safe
// inside JavaScript); invalid UTF-8 becomes U+FFFD.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	plain := 0 // start of the run of bytes that need no escaping
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[plain:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			plain = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[plain:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[plain:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		plain = i
	}
	dst = append(dst, s[plain:]...)
	return append(dst, '"')
}

// appendFloat appends a finite f as encoding/json formats a float64: the
// shortest representation that reads back exactly, in exponent form only
// below 1e-6 or from 1e21 on, with a one-digit exponent where possible.
func appendFloat(dst []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// "1e-07" becomes "1e-7".
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

func (e *encoder) bool(b bool) {
	if b {
		e.buf.WriteString("true")
	} else {
		e.buf.WriteString("false")
	}
}

// field writes the key of an object member, preceded by the opening brace
// for the first member and by a comma otherwise. Keys are protocol
// constants and need no escaping.
func (e *encoder) field(name string, first bool) {
	if first {
		e.buf.WriteByte('{')
	} else {
		e.buf.WriteByte(',')
	}
	e.buf.WriteByte('"')
	e.buf.WriteString(name)
	e.buf.WriteString(`":`)
}

// requestEncoder is implemented by the request types of this package, which
// encode themselves without reflection over the envelope.
type requestEncoder interface {
	encodeRequest(e *encoder) error
}

// request writes request as JSON: the request types of this package
// directly, any other value with encoding/json.
func (e *encoder) request(request any) error {
	if r, ok := request.(requestEncoder); ok {
		return r.encodeRequest(e)
	}
	return e.std(request)
}

// Buffers larger than this are not kept for reuse, so that one huge request
// does not pin its memory for the life of the process.
const maxPooledBuffer = 1 << 20

// pooledEncoder is an encoder with its own buffer, kept in encoderPool.
type pooledEncoder struct {
	encoder
	b bytes.Buffer
}

var encoderPool = sync.Pool{New: func() any {
	p := &pooledEncoder{}
	p.encoder = encoder{buf: &p.b, enc: json.NewEncoder(&p.b)}
	return p
}}

func getEncoder() *pooledEncoder {
	p := encoderPool.Get().(*pooledEncoder)
	p.b.Reset()
	// An encoding that failed half-way leaves keys on the stack.
	clear(p.keys)
	p.keys = p.keys[:0]
	p.depth = 0
	return p
}

func putEncoder(p *pooledEncoder) {
	if p.b.Cap() > maxPooledBuffer {
		return
	}
	encoderPool.Put(p)
}

// EncodedRequest is a hook request encoded as JSON (EncodeRequest), in a
// pooled buffer shared between its readers: those an HTTP client asks for
// (the first send, and GetBody for redirects and retries). The transport
// may close a request body after Do has returned, so the buffer goes back
// to the pool only once the caller (Release) and every reader (Close) are
// done with it. A reader that is never closed only costs the reuse.
type EncodedRequest struct {
	p    *pooledEncoder
	refs atomic.Int32
}

// EncodeRequest encodes request as JSON, byte for byte as json.Marshal
// would, with sorted map keys: the request types of this package directly,
// any other value with encoding/json. The caller must Release the result,
// also when it returns an error.
func EncodeRequest(request any) (*EncodedRequest, error) {
	rb := &EncodedRequest{p: getEncoder()}
	rb.refs.Store(1) // the caller's reference
	return rb, rb.p.request(request)
}

// Bytes returns the encoded request; valid until it is released.
func (rb *EncodedRequest) Bytes() []byte { return rb.p.b.Bytes() }

// Release gives back the caller's reference.
func (rb *EncodedRequest) Release() {
	if rb.refs.Add(-1) == 0 {
		putEncoder(rb.p)
	}
}

// NewReader returns a reader of the encoded request, which holds the
// buffer until it is closed.
func (rb *EncodedRequest) NewReader() io.ReadCloser {
	rb.refs.Add(1)
	return &bodyReader{Reader: bytes.NewReader(rb.p.b.Bytes()), rb: rb}
}

type bodyReader struct {
	*bytes.Reader
	once sync.Once
	rb   *EncodedRequest
}

func (r *bodyReader) Close() error {
	r.once.Do(r.rb.Release)
	return nil
}
