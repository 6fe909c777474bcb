package cli

import (
	"bytes"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v2"
)

// TestInstallControlPlane_ServeTakesTheDeploymentsArgs runs `config show`
// with the arguments the printed Deployment gives `meshnames serve`, so
// that a flag serve does not know or a configuration it refuses fails
// here rather than in a crash-looping Pod.
func TestInstallControlPlane_ServeTakesTheDeploymentsArgs(t *testing.T) {
	for _, extra := range [][]string{nil, {"--api-tls-secret", "api-tls", "--namespace", "mesh-system", "--zone", "east"}} {
		var out, errOut bytes.Buffer
		env := Env{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(string) (string, bool) { return "", false }}
		root := New(env)
		root.SetArgs(append([]string{"install", "control-plane"}, extra...))
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		var args []string
		for _, doc := range strings.Split(out.String(), "\n---\n") {
			var d struct {
				Kind string
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct{ Args []string }
						}
					}
				}
			}
			if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
				t.Fatal(err)
			}
			if d.Kind == "Deployment" {
				args = d.Spec.Template.Spec.Containers[0].Args
			}
		}
		if len(args) < 2 || args[0] != "serve" {
			t.Fatalf("the Deployment's args: %q", args)
		}
		out.Reset()
		root = New(env)
		root.SetArgs(append([]string{"config", "show"}, args[1:]...))
		if err := root.Execute(); err != nil {
			t.Fatalf("serve %s: %v", strings.Join(args[1:], " "), err)
		}
		wants := []string{"env: kubernetes", "addr: 0.0.0.0:5681", "addr: 0.0.0.0:5653"}
		if extra != nil {
			wants = append(wants, "addr: 0.0.0.0:5678", "cert: /etc/meshnames/api-tls/tls.crt")
		}
		for _, want := range wants {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: config show has no %q:\n%s", extra, want, out.String())
			}
		}
	}
}
