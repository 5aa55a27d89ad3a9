package main

import "testing"

func TestParseStressBytes(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "50M", want: 50 << 20},
		{in: "50m", want: 50 << 20},
		{in: "1G", want: 1 << 30},
		{in: "512K", want: 512 << 10},
		{in: "100B", want: 100},
		{in: "4096", want: 4096},
		{in: "M", wantErr: true},
		{in: "-1M", wantErr: true},
		{in: "50MB", wantErr: true},
		{in: "", wantErr: true},
	} {
		got, err := parseStressBytes(c.in)
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("parseStressBytes(%q) = %d, %v; want %d (error %v)", c.in, got, err, c.want, c.wantErr)
		}
	}
}
