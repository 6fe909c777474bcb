package resource

import "testing"

func TestZoneIngress(t *testing.T) {
	zi := func(networking string) string { return doc(ZoneIngress, "ingress-1", "networking:\n"+networking) }
	runValidation(t, []validationCase{
		{"Valid", zi("  address: 192.168.0.1\n  port: 10001\n  advertisedAddress: 10.0.0.1\n  advertisedPort: 10001\n"), nil},
		{"NoAdvertised", zi("  address: 192.168.0.1\n  port: 10001\n"), nil},
		{"DNSNames", zi("  address: ingress.east.internal\n  port: 10001\n  advertisedAddress: ingress.example.com\n  advertisedPort: 443\n"), nil},
		{"IPv6", zi("  address: 'fd00::1'\n  port: 10001\n  advertisedAddress: '2001:db8::1'\n  advertisedPort: 10001\n"), nil},
		{"AddressMissing", zi("  port: 10001\n"), []v{{"spec.networking.address", "must not be empty"}}},
		{"AddressUnspecified", zi("  address: 0.0.0.0\n  port: 10001\n"), []v{{"spec.networking.address", "must not be 0.0.0.0 or ::"}}},
		{"AddressBadIP", zi("  address: 10.0.0.256\n  port: 10001\n"), []v{{"spec.networking.address", "must be an IP address or a DNS name"}}},
		{"AddressBadName", zi("  address: 'in gress'\n  port: 10001\n"), []v{{"spec.networking.address", "must be an IP address or a DNS name"}}},
		{"AddressIPv6Zone", zi("  address: 'fe80::1%eth0'\n  port: 10001\n"), []v{{"spec.networking.address", "without an IPv6 zone"}}},
		{"PortMissing", zi("  address: 192.168.0.1\n"), []v{{"spec.networking.port", "between 1 and 65535, got 0"}}},
		{"PortTooHigh", zi("  address: 192.168.0.1\n  port: 65536\n"), []v{{"spec.networking.port", "got 65536"}}},
		{"PortNegative", zi("  address: 192.168.0.1\n  port: -1\n"), []v{{"spec.networking.port", "got -1"}}},
		{"AdvertisedAddressAlone", zi("  address: 192.168.0.1\n  port: 10001\n  advertisedAddress: 10.0.0.1\n"),
			[]v{{"spec.networking.advertisedPort", "must be set together with advertisedAddress"}}},
		{"AdvertisedPortAlone", zi("  address: 192.168.0.1\n  port: 10001\n  advertisedPort: 10001\n"),
			[]v{{"spec.networking.advertisedAddress", "must be set together with advertisedPort"}}},
		{"AdvertisedAddressUnspecified", zi("  address: 192.168.0.1\n  port: 10001\n  advertisedAddress: '::'\n  advertisedPort: 10001\n"),
			[]v{{"spec.networking.advertisedAddress", "must not be 0.0.0.0 or ::"}}},
		{"AdvertisedAddressBad", zi("  address: 192.168.0.1\n  port: 10001\n  advertisedAddress: -lb-\n  advertisedPort: 10001\n"),
			[]v{{"spec.networking.advertisedAddress", "must be an IP address or a DNS name"}}},
		{"AdvertisedPortTooHigh", zi("  address: 192.168.0.1\n  port: 10001\n  advertisedAddress: 10.0.0.1\n  advertisedPort: 70000\n"),
			[]v{{"spec.networking.advertisedPort", "got 70000"}}},
		{"AllAtOnce", zi("  address: 0.0.0.0\n  port: 0\n  advertisedAddress: 10.0.0.999\n"),
			[]v{{"spec.networking.address", ""}, {"spec.networking.port", ""}, {"spec.networking.advertisedPort", ""}, {"spec.networking.advertisedAddress", ""}}},
	})
}

func TestZoneIngress_Mesh(t *testing.T) {
	o := decodeDefault(t, doc(ZoneIngress, "ingress-1", "networking: {address: 192.168.0.1, port: 10001}"))
	o.Mesh = "default"
	checkViolations(t, Validate(o), []v{{"mesh", "must be empty: ZoneIngress is not mesh-scoped"}})
}

func TestZoneIngress_Reachable(t *testing.T) {
	for _, tt := range []struct {
		n        ZoneIngressNetworking
		hostPort string
	}{
		{ZoneIngressNetworking{Address: "192.168.0.1", Port: 10001, AdvertisedAddress: "10.0.0.1", AdvertisedPort: 443}, "10.0.0.1:443"},
		{ZoneIngressNetworking{Address: "192.168.0.1", Port: 10001}, "192.168.0.1:10001"},
		{ZoneIngressNetworking{Address: "fd00::1", Port: 10001}, "[fd00::1]:10001"},
	} {
		s := &ZoneIngressSpec{Networking: tt.n}
		if got := HostPort(s.Reachable()); got != tt.hostPort {
			t.Errorf("HostPort(Reachable(%+v)) = %q, want %q", tt.n, got, tt.hostPort)
		}
	}
}
