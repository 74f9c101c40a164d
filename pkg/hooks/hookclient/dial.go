/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// DialRule says which addresses a hook may be called at. It is checked
// when a connection is dialed, on the address DNS resolved the hook's
// host to (net.Dialer's ControlContext), so that a name that resolves, or
// later re-resolves, to a refused address is refused too. With an HTTP
// proxy from the environment the address dialed, and so checked, is the
// proxy's.
//
// The zero value refuses link-local addresses (169.254.0.0/16,
// fe80::/10), the cloud metadata addresses that are not link-local
// (100.100.100.200, fd00:ec2::254), loopback addresses (127.0.0.0/8, ::1)
// and the unspecified ones (0.0.0.0, ::, which reach this host), each also
// as an IPv4-mapped IPv6 address or through the well-known NAT64 prefix
// (64:ff9b::/96). Every other address is allowed:
// private ranges, node IPs and the API server's too (a NetworkPolicy on
// metactl's Pod is the way to fence those).
type DialRule struct {
	// AllowLoopback allows loopback and unspecified addresses: hooks
	// running beside metactl, as under `metactl dev`. Default false:
	// refused.
	AllowLoopback bool
	// AllowLinkLocal allows link-local and cloud metadata addresses.
	// Default false: refused.
	AllowLinkLocal bool
	// LoopbackHint and LinkLocalHint end the message of a refusal: what
	// allows the address. Default: the flags of metactl run that set
	// AllowLoopback (--allow-loopback-hooks) and AllowLinkLocal
	// (--allow-link-local-hooks).
	LoopbackHint, LinkLocalHint string
}

// metadataAddresses are cloud metadata services outside the link-local
// ranges (AWS's IPv6 one, Alibaba Cloud's).
var metadataAddresses = []netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
}

// RefusedAddressError is the error of a dial that DialRule refused.
type RefusedAddressError struct {
	// Address is the address refused (IP and port); Class says what it is
	// ("link-local", "cloud metadata", "loopback").
	Address, Class string
	// Hint says what allows it.
	Hint string
}

func (e *RefusedAddressError) Error() string {
	return fmt.Sprintf("address %s is %s, which metactl does not call hooks at: %s", e.Address, e.Class, e.Hint)
}

// Check returns a *RefusedAddressError when r refuses address ("IP:port",
// as dialed), nil when it allows it. An address that is not an IP is
// allowed: dials are checked after DNS.
func (r DialRule) Check(address string) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return nil
	}
	ip = embeddedIPv4(ip.Unmap().WithZone(""))
	class := ""
	switch {
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		if !r.AllowLinkLocal {
			class = "link-local"
		}
	case isMetadata(ip):
		if !r.AllowLinkLocal {
			class = "a cloud metadata address"
		}
	case ip.IsLoopback() || ip.IsUnspecified():
		if !r.AllowLoopback {
			class = "loopback"
		}
	}
	if class == "" {
		return nil
	}
	hint := r.LinkLocalHint
	if class == "loopback" {
		hint = r.LoopbackHint
	}
	if hint == "" {
		hint = "run metactl with --allow-link-local-hooks to allow it"
		if class == "loopback" {
			hint = "run metactl with --allow-loopback-hooks to allow it (metactl dev does)"
		}
	}
	return &RefusedAddressError{Address: address, Class: class, Hint: hint}
}

// nat64 is the well-known NAT64 prefix (RFC 6052), whose addresses reach
// the IPv4 address in their last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// embeddedIPv4 is the IPv4 address a NAT64 address reaches, else ip.
func embeddedIPv4(ip netip.Addr) netip.Addr {
	if !nat64.Contains(ip) {
		return ip
	}
	b := ip.As16()
	return netip.AddrFrom4([4]byte(b[12:]))
}

func isMetadata(ip netip.Addr) bool {
	for _, m := range metadataAddresses {
		if ip == m {
			return true
		}
	}
	return false
}

// dialRuleKey keys the DialRule of a call in its context.
type dialRuleKey struct{}

// withDialRule returns ctx carrying r, for the dialer of NewTransport; ctx
// itself when r is nil.
func withDialRule(ctx context.Context, r *DialRule) context.Context {
	if r == nil {
		return ctx
	}
	return context.WithValue(ctx, dialRuleKey{}, *r)
}

// controlDial is the ControlContext of NewTransport's dialer: it checks
// the DialRule of the call whose request dials (Client.Call puts its
// Options.Dial in the request's context, which the HTTP transport's dial
// keeps the values of), and allows a dial without one.
func controlDial(ctx context.Context, _, address string, _ syscall.RawConn) error {
	r, ok := ctx.Value(dialRuleKey{}).(DialRule)
	if !ok {
		return nil
	}
	return r.Check(address)
}
