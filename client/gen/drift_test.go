// Package gen holds the generator of the client's API types: run
// `make client-types` after changing api/openapi.json.
package gen

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestTypesAreFreshlyGenerated fails while the committed ../types.gen.go
// differs from what oapi-codegen writes from api/openapi.json now.
func TestTypesAreFreshlyGenerated(t *testing.T) {
	out := filepath.Join(t.TempDir(), "types.gen.go")
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", "oapi-codegen.yaml", "-o", out, "../../api/openapi.json")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, b)
	}
	fresh, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("../types.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, committed) {
		t.Errorf("client/types.gen.go differs from a fresh generation from api/openapi.json: run make client-types")
	}
}
