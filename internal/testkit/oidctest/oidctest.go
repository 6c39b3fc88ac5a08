// Package oidctest runs the tests' OpenID Connect provider
// (test/oidcprovider, built on github.com/zitadel/oidc) on loopback and
// drives it: signing tokens, rotating keys, counting JWKS fetches and
// signing people in through its login page.
package oidctest

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/searchd/searchd/internal/pgcluster"
)

// Config configures the provider, which listens on an OS-chosen port of
// 127.0.0.1: its clients and users. It is encoded as the provider's
// -config.
type Config struct {
	Clients []Client `json:"clients"`
	Users   []User   `json:"users"`
}

// Client is a client registered at the provider.
type Client struct {
	ID string `json:"id"`
	// Secret makes a confidential client; "" a public one, which must use
	// PKCE.
	Secret       string   `json:"secret,omitempty"`
	RedirectURIs []string `json:"redirect_uris"`
	// Audience is added to the aud of the client's tokens.
	Audience []string `json:"audience,omitempty"`
}

// User can sign in at the provider; Org and Roles become the org_id and
// roles claims.
type User struct {
	Username string   `json:"username"`
	Password string   `json:"password"`
	Org      string   `json:"org,omitempty"`
	Roles    []string `json:"roles,omitempty"`
}

// Provider is a running provider. Its methods are safe for concurrent use.
type Provider struct {
	// Issuer is its issuer URL.
	Issuer string

	proc   *pgcluster.Process
	mu     sync.Mutex
	stdin  io.WriteCloser
	stdout *bufio.Scanner
}

// built is the binary [Binary] built, once it has.
var built string

// Binary returns the provider binary, built once per process into a
// temporary directory (see [Cleanup]).
var Binary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "searchd-oidcprovider-")
	if err != nil {
		return "", err
	}
	built = filepath.Join(dir, "oidcprovider")
	if out, err := exec.Command("go", "build", "-o", built, "github.com/searchd/searchd/test/oidcprovider").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the test provider: %v\n%s", err, out)
	}
	return built, nil
})

// Cleanup removes the binary [Binary] built, if any.
func Cleanup() {
	if built != "" {
		_ = os.RemoveAll(filepath.Dir(built))
	}
}

// Start starts the provider binary bin with cfg and waits until it serves.
// It dies with this process.
func Start(bin string, cfg Config) (*Provider, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-config", string(raw))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, os.Stderr
	proc, err := pgcluster.StartProcess(cmd, "", &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL})
	inR.Close()
	outW.Close()
	if err != nil {
		return nil, err
	}
	p := &Provider{proc: proc, stdin: inW, stdout: bufio.NewScanner(outR)}
	p.stdout.Buffer(make([]byte, 64<<10), 1<<20)
	killed := time.AfterFunc(30*time.Second, proc.Kill) // which ends the Scan
	var ready struct{ Issuer string }
	switch served := p.stdout.Scan(); {
	case !killed.Stop():
		err = errors.New("the test provider did not serve within 30 s")
	case !served:
		err = errors.New("the test provider exited before it served")
	default:
		err = json.Unmarshal(p.stdout.Bytes(), &ready)
	}
	if err != nil {
		proc.Kill()
		return nil, err
	}
	p.Issuer = ready.Issuer
	return p, nil
}

// StartT starts the provider built by [Binary] and stops it when t ends.
func StartT(t testing.TB, cfg Config) *Provider {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(bin, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// Stop kills the provider and waits until it is gone.
func (p *Provider) Stop() {
	p.proc.Kill()
	p.stdin.Close()
}

// ask sends one command and returns the answer.
func (p *Provider) ask(cmd string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := io.WriteString(p.stdin, cmd+"\n"); err != nil {
		return "", err
	}
	if !p.stdout.Scan() {
		return "", errors.New("the test provider has stopped")
	}
	answer := p.stdout.Text()
	if strings.HasPrefix(answer, "error: ") {
		return "", errors.New("test provider: " + answer)
	}
	return answer, nil
}

// Keys are the ids of the provider's keys.
type Keys struct {
	// RSA is the current signing key; EC and Ed the P-256 and Ed25519
	// keys; Unpublished an RSA key in no JWKS.
	RSA, EC, Ed, Unpublished string
}

// Keys returns the ids of the provider's keys.
func (p *Provider) Keys() (Keys, error) {
	a, err := p.ask("keys")
	if err != nil {
		return Keys{}, err
	}
	var k Keys
	return k, json.Unmarshal([]byte(a), &k)
}

// Sign signs header and claims, exactly as given, with key "rsa", "ec",
// "ed" or "unpublished". The caller writes alg and kid.
func (p *Provider) Sign(key, header, claims string) (string, error) {
	enc := base64.RawURLEncoding.EncodeToString
	return p.ask(fmt.Sprintf("sign %s %s %s", key, enc([]byte(header)), enc([]byte(claims))))
}

// Rotate publishes a new RSA signing key beside the old one and returns
// its kid.
func (p *Provider) Rotate() (string, error) { return p.ask("rotate") }

// Hits returns how many times the provider's JWKS was fetched.
func (p *Provider) Hits() (int, error) {
	a, err := p.ask("hits")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(a)
}

// Tokens are what a sign-in returned.
type Tokens struct {
	Access, ID string
}

// Login signs username in through the login page as a browser would, for
// public client c (authorization code with PKCE), and exchanges the code
// for tokens.
func (p *Provider) Login(ctx context.Context, c Client, username, password string) (Tokens, error) {
	conf := oauth2.Config{ClientID: c.ID, ClientSecret: c.Secret, RedirectURL: c.RedirectURIs[0],
		Scopes:   []string{"openid"},
		Endpoint: oauth2.Endpoint{AuthURL: p.Issuer + "/auth", TokenURL: p.Issuer + "/oauth/token"}}
	verifier := oauth2.GenerateVerifier()
	jar, _ := cookiejar.New(nil)
	redirect, _ := url.Parse(c.RedirectURIs[0])
	var code string
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(r *http.Request, _ []*http.Request) error {
			if r.URL.Host == redirect.Host && r.URL.Path == redirect.Path {
				code = r.URL.Query().Get("code")
				return http.ErrUseLastResponse
			}
			return nil
		}}
	resp, err := browser.Get(conf.AuthCodeURL("state-1", oauth2.S256ChallengeOption(verifier),
		oauth2.SetAuthURLParam("nonce", "nonce-1")))
	if err != nil {
		return Tokens{}, err
	}
	resp.Body.Close()
	// The login page is a form with the auth request's id.
	id := resp.Request.URL.Query().Get("authRequestID")
	if id == "" {
		return Tokens{}, fmt.Errorf("the provider sent the browser to %s, not to its login page", resp.Request.URL)
	}
	resp, err = browser.PostForm(p.Issuer+"/login/username", url.Values{"id": {id}, "username": {username}, "password": {password}})
	if err != nil {
		return Tokens{}, err
	}
	resp.Body.Close()
	if code == "" {
		return Tokens{}, fmt.Errorf("the login answered %s without a redirect carrying a code", resp.Status)
	}
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return Tokens{}, err
	}
	idToken, _ := tok.Extra("id_token").(string)
	return Tokens{Access: tok.AccessToken, ID: idToken}, nil
}

// AnswerLines reads in line by line (up to 1 MiB each) and prints answer's
// reply to each, until in or ctx ends: the control loop of test programs
// driven through their standard streams.
func AnswerLines(ctx context.Context, in io.Reader, answer func(line string) string) {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case line, ok := <-lines:
			if !ok {
				return
			}
			fmt.Println(answer(line))
		}
	}
}
