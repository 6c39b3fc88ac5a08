package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"testing"
)

// TestKeyFitsPinsTheAlgorithmToTheKey: a JWKS key whose JWK names no alg
// is still used only by its own algorithm, and a symmetric or weak key by
// none.
func TestKeyFitsPinsTheAlgorithmToTheKey(t *testing.T) {
	t.Parallel()
	rsa2048, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsa1024, _ := rsa.GenerateKey(rand.Reader, 1024)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	keys := map[string]any{"rsa2048": &rsa2048.PublicKey, "rsa1024": &rsa1024.PublicKey, "p256": &p256.PublicKey,
		"p384": &p384.PublicKey, "ed25519": edPub, "oct": []byte("a-symmetric-key-a-symmetric-key-0")}
	fits := map[string]string{"RS256": "rsa2048", "ES256": "p256", "EdDSA": "ed25519"}
	for _, alg := range []string{"RS256", "ES256", "EdDSA", "HS256", "PS256", "none"} {
		for name, k := range keys {
			if got, want := keyFits(alg, k), fits[alg] == name; got != want {
				t.Errorf("keyFits(%s, %s) = %t, want %t", alg, name, got, want)
			}
		}
	}
}
