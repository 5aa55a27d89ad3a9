package api

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestOpenAPIUpToDate regenerates the OpenAPI definitions with hack/update-openapi.sh (openapi-gen at the version
// go.mod pins, fetched like any pinned module and checked against go.sum) into a temporary directory and fails when the checked-in file
// differs.
func TestOpenAPIUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs openapi-gen")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not available")
	}
	out := t.TempDir()
	cmd := exec.Command(bash, filepath.Join("..", "..", "hack", "update-openapi.sh"), out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/update-openapi.sh: %v\n%s", err, b)
	}
	fresh, err := os.ReadFile(filepath.Join(out, "zz_generated.openapi.go"))
	if err != nil {
		t.Fatal(err)
	}
	current, err := os.ReadFile(filepath.Join("generated", "openapi", "zz_generated.openapi.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, current) {
		t.Fatal("pkg/api/generated/openapi/zz_generated.openapi.go is stale: run hack/update-openapi.sh (make generate)")
	}
}
