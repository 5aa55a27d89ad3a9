package logonly

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestErrorKeepsDetailOutOfItsText(t *testing.T) {
	base := errors.New("status 500")
	err := fmt.Errorf("node %q: %w", "n", Wrap(base, "body", "password=hunter2"))
	if strings.Contains(err.Error(), "hunter2") || !errors.Is(err, base) {
		t.Fatalf("error %q: want the detail out of the text and the cause kept", err)
	}
	if kv := KV(err); len(kv) != 2 || kv[0] != "body" || kv[1] != "password=hunter2" {
		t.Fatalf("KV = %v", kv)
	}
	if KV(base) != nil || Wrap(nil, "k", "v") != nil {
		t.Fatal("no detail expected")
	}
}

func TestRecovered(t *testing.T) {
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = Recovered(r, "node \"n\": scrape")
			}
		}()
		var m map[string]int
		//lint:ignore SA5000 a real runtime panic (its message and stack) is what the test checks
		m["x"] = 1 // assignment to entry in nil map
		return nil
	}()
	if !errors.Is(err, ErrPanic) || !strings.Contains(err.Error(), `node "n": scrape: panic`) ||
		strings.Contains(err.Error(), "nil map") {
		t.Fatalf("error %q: want what panicked, without the panic's value", err)
	}
	kv := KV(err)
	if len(kv) != 4 || !strings.Contains(kv[1].(string), "nil map") || !strings.Contains(kv[3].(string), "TestRecovered") {
		t.Fatalf("log pairs %v: want the panic's value and a stack through the test", kv)
	}
}
