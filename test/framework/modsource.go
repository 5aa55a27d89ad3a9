package framework

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// moduleSource downloads module@version into the module cache (`go mod download -json`, run in dir with env; nil
// env is this process's) and returns the module's folder: the tools built in their own module (metrics-server,
// Thanos) and the manifests read from one come from there.
func moduleSource(dir string, env []string, module, version string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if err != nil {
		_ = json.Unmarshal(raw, &mod) // with -json the go command says why in its output, not on stderr
		return "", fmt.Errorf("go mod download %s@%s: %w: %s%s", module, version, err, mod.Error, stderr.String())
	}
	if err := json.Unmarshal(raw, &mod); err != nil {
		return "", fmt.Errorf("go mod download %s@%s: reading its output %q: %w", module, version, raw, err)
	}
	if mod.Error != "" || mod.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: no module directory: %s", module, version, mod.Error)
	}
	return mod.Dir, nil
}

// buildDir makes a temporary folder beside dst for a tool built in its own module: the binary is renamed into
// place from there when complete, so the cache never holds half a binary. The caller removes it.
func buildDir(dst string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", filepath.Dir(dst), err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".build-")
	if err != nil {
		return "", fmt.Errorf("creating a build directory: %w", err)
	}
	return tmp, nil
}
