package chunks

import (
	"bytes"
	"context"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeImage(t *testing.T, dir string) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	rng := rand.New(rand.NewSource(1))
	disk := make([]byte, 3*Size+12345)
	rng.Read(disk[:Size])              // chunk 0: data
	rng.Read(disk[2*Size : 2*Size+99]) // chunk 1 is all zeros (a hole); chunk 2 mostly zeros
	rng.Read(disk[3*Size:])
	os.WriteFile(filepath.Join(dir, "rootfs.img"), disk, 0o644)
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"recipe":"base"}`), 0o644)
	os.WriteFile(filepath.Join(dir, "vmlinux"), disk[:1000], 0o755)
}

func TestAnImageMovesByChunksAndIsVerified(t *testing.T) {
	src := filepath.Join(t.TempDir(), "base-abc")
	writeImage(t, src)
	m, err := Build(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != 3 || m.Files[1].Path != "rootfs.img" || len(m.Files[1].Chunks) != 4 {
		t.Fatalf("unexpected manifest: %+v", m.Files)
	}
	store := NewStore()
	digest := store.Add(src, m)
	peer := httptest.NewServer(store)
	defer peer.Close()

	dst := t.TempDir()
	f := &Fetcher{Client: peer.Client()}
	got, st, err := f.Fetch(context.Background(), []string{peer.URL}, digest, dst, NewStore())
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest() != digest {
		t.Fatal("fetched manifest differs")
	}
	for _, name := range []string{"rootfs.img", "manifest.json", "vmlinux"} {
		a, _ := os.ReadFile(filepath.Join(src, name))
		b, err := os.ReadFile(filepath.Join(dst, "base-abc", name))
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("%s differs after the transfer (%v)", name, err)
		}
	}
	if st.Zero != 1 || st.Fetched != st.Chunks-1 {
		t.Errorf("stats %+v: want one hole, the rest fetched", st)
	}
	if fi, _ := os.Stat(filepath.Join(dst, "base-abc", "vmlinux")); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode not kept: %v", fi.Mode())
	}
	if _, err := os.Stat(filepath.Join(dst, "base-abc.fetch")); !os.IsNotExist(err) {
		t.Error("the temporary directory was left behind")
	}
}

func TestChunksAlreadyHeldLocallyAreNotFetched(t *testing.T) {
	src := filepath.Join(t.TempDir(), "base-v2")
	writeImage(t, src)
	// The node already holds an older image with the same rootfs.
	old := filepath.Join(t.TempDir(), "base-v1")
	writeImage(t, old)
	os.WriteFile(filepath.Join(old, "manifest.json"), []byte(`{"recipe":"base","old":true}`), 0o644)
	om, _ := Build(old)
	local := NewStore()
	local.Add(old, om)

	m, _ := Build(src)
	store := NewStore()
	digest := store.Add(src, m)
	peer := httptest.NewServer(store)
	defer peer.Close()
	_, st, err := (&Fetcher{Client: peer.Client()}).Fetch(context.Background(), []string{peer.URL}, digest, t.TempDir(), local)
	if err != nil {
		t.Fatal(err)
	}
	if st.Fetched != 1 || st.Local < 3 {
		t.Fatalf("want only manifest.json's chunk fetched, the rest local: %+v", st)
	}
}

func TestACorruptPeerIsCaughtAndTheNextPeerServes(t *testing.T) {
	src := filepath.Join(t.TempDir(), "base-abc")
	writeImage(t, src)
	m, _ := Build(src)
	store := NewStore()
	digest := store.Add(src, m)
	good := httptest.NewServer(store)
	defer good.Close()
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/manifests/") {
			store.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		store.ServeHTTP(rec, r)
		b := rec.Body.Bytes()
		if len(b) > 0 {
			b[0] ^= 1 // one flipped bit
		}
		w.Write(b)
	}))
	defer evil.Close()
	f := &Fetcher{Client: http.DefaultClient}
	if _, _, err := f.Fetch(context.Background(), []string{evil.URL}, digest, t.TempDir(), NewStore()); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("a corrupt chunk was accepted: %v", err)
	}
	dst := t.TempDir()
	if _, _, err := f.Fetch(context.Background(), []string{evil.URL, good.URL}, digest, dst, NewStore()); err != nil {
		t.Fatalf("the good peer should have served: %v", err)
	}
	// A manifest that is not the one asked for is refused.
	if _, _, err := f.Fetch(context.Background(), []string{good.URL}, strings.Repeat("0", 64), t.TempDir(), NewStore()); err == nil {
		t.Fatal("an unknown manifest digest was served")
	}
}

func TestTheImageCachesUseRecordsAreNotPartOfTheImage(t *testing.T) {
	src := filepath.Join(t.TempDir(), "base-abc")
	writeImage(t, src)
	os.MkdirAll(filepath.Join(src, "users"), 0o755)
	os.WriteFile(filepath.Join(src, "users", "4d916167defe2839"), []byte("in use"), 0o644)
	m, err := Build(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		if strings.HasPrefix(f.Path, "users") {
			t.Fatalf("%s is in the manifest: another hutchd's use of the build changes it", f.Path)
		}
	}
	if len(m.Files) != 3 {
		t.Fatalf("unexpected manifest: %+v", m.Files)
	}
}
