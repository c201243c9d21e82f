// Package chunks moves template images (and, later, snapshots) between nodes as
// content-addressed, checksummed chunks: a manifest lists each file as 4 MiB chunks by SHA-256;
// the manifest's own SHA-256 is the image's identity (BoxTemplate.status.digest). A node serves
// the chunks of what it holds; another node fetches the manifest, checks its digest, copies the
// chunks it already holds locally (any manifest it has, same digest), fetches the rest from
// peers, checks each one, leaves all-zero chunks as holes (images are sparse), and renames the
// finished directory into place last, so a half-fetched image is never seen.
package chunks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

const Size = 4 << 20

type Chunk struct {
	Digest string `json:"sha256"`
	Size   int64  `json:"size"`
}

type File struct {
	Path   string  `json:"path"`
	Size   int64   `json:"size"`
	Mode   uint32  `json:"mode"`
	Chunks []Chunk `json:"chunks"`
}

type Manifest struct {
	Version int    `json:"version"`
	Name    string `json:"name"` // the directory's name (an image cache entry: recipe-imagekey)
	Files   []File `json:"files"`
}

// Encode is the manifest's canonical bytes; Digest their SHA-256.
func (m *Manifest) Encode() []byte {
	b, _ := json.Marshal(m)
	return b
}

func (m *Manifest) Digest() string {
	s := sha256.Sum256(m.Encode())
	return hex.EncodeToString(s[:])
}

func (m *Manifest) Bytes() (total int64) {
	for _, f := range m.Files {
		total += f.Size
	}
	return total
}

var zeroDigest = func() string {
	s := sha256.Sum256(make([]byte, Size))
	return hex.EncodeToString(s[:])
}()

// notImage lists what an image build directory holds besides the image: users/ is where every
// hutchd sharing the image cache records its use of the build (storage/image_cache.h), and it
// changes whenever any of them starts a VM, so its chunks would be stale before a peer fetched
// them.
var notImage = map[string]bool{"users": true}

// Build reads every regular file under dir (but notImage) into a manifest.
func Build(dir string) (*Manifest, error) {
	m := &Manifest{Version: 1, Name: filepath.Base(dir)}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir {
			if rel, _ := filepath.Rel(dir, path); notImage[rel] {
				return fs.SkipDir
			}
		}
		if !d.Type().IsRegular() {
			if d.IsDir() || d.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			return fmt.Errorf("%s is a symlink; images hold regular files only", path)
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		f := File{Path: rel, Size: info.Size(), Mode: uint32(info.Mode().Perm())}
		fh, err := os.Open(path)
		if err != nil {
			return err
		}
		defer fh.Close()
		buf := make([]byte, Size)
		for {
			n, err := io.ReadFull(fh, buf)
			if n > 0 {
				s := sha256.Sum256(buf[:n])
				f.Chunks = append(f.Chunks, Chunk{Digest: hex.EncodeToString(s[:]), Size: int64(n)})
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			}
			if err != nil {
				return err
			}
		}
		m.Files = append(m.Files, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot index %s: %w", dir, err)
	}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	return m, nil
}

type location struct {
	path   string
	offset int64
	size   int64
}

// Store is a node's index of what it can serve: manifests by digest, chunks by digest.
type Store struct {
	mu        sync.RWMutex
	manifests map[string][]byte
	chunks    map[string]location
}

func NewStore() *Store {
	return &Store{manifests: map[string][]byte{}, chunks: map[string]location{}}
}

// Add indexes a manifest whose files are in dir; it returns the manifest's digest.
func (s *Store) Add(dir string, m *Manifest) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := m.Digest()
	s.manifests[d] = m.Encode()
	for _, f := range m.Files {
		off := int64(0)
		for _, c := range f.Chunks {
			if _, ok := s.chunks[c.Digest]; !ok {
				s.chunks[c.Digest] = location{filepath.Join(dir, f.Path), off, c.Size}
			}
			off += c.Size
		}
	}
	return d
}

func (s *Store) readLocal(digest string) ([]byte, bool) {
	s.mu.RLock()
	loc, ok := s.chunks[digest]
	s.mu.RUnlock()
	if !ok {
		return nil, false
	}
	f, err := os.Open(loc.path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	buf := make([]byte, loc.size)
	if _, err := f.ReadAt(buf, loc.offset); err != nil && err != io.EOF {
		return nil, false
	}
	if sum(buf) != digest { // the file changed under the index: do not trust it
		return nil, false
	}
	return buf, true
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func hexDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// ServeHTTP answers GET /manifests/<sha256> and GET /chunks/<sha256>.
func (s *Store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind, digest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if r.Method != http.MethodGet || !hexDigest(digest) {
		http.Error(w, "GET /manifests/SHA256 or /chunks/SHA256", http.StatusNotFound)
		return
	}
	switch kind {
	case "manifests":
		s.mu.RLock()
		b, ok := s.manifests[digest]
		s.mu.RUnlock()
		if !ok {
			http.Error(w, "no such manifest here", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	case "chunks":
		b, ok := s.readLocal(digest)
		if !ok {
			http.Error(w, "no such chunk here", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
	default:
		http.Error(w, "unknown", http.StatusNotFound)
	}
}

// Stats of one fetch.
type Stats struct {
	Chunks, Fetched, Local, Zero int
	BytesFetched                 int64
}

// Fetcher gets manifests and chunks from peers (base URLs that serve Store.ServeHTTP) with a
// client that adds whatever the peers ask for (a token).
type Fetcher struct {
	Client *http.Client
	Header http.Header
}

func (f *Fetcher) get(ctx context.Context, peer, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimRight(peer, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range f.Header {
		req.Header[k] = v
	}
	resp, err := f.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, Size+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s%s: HTTP %d %s", peer, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}

// Fetch assembles the image whose manifest has digest into parent/<manifest name>, taking
// chunks from local (when it has them) or from the peers in turn, each one checked.
func (f *Fetcher) Fetch(ctx context.Context, peers []string, digest, parent string, local *Store) (*Manifest, Stats, error) {
	var st Stats
	var m Manifest
	var lastErr error
	for _, p := range peers {
		b, err := f.get(ctx, p, "/manifests/"+digest)
		if err == nil && sum(b) != digest {
			err = fmt.Errorf("the manifest from %s does not match its digest %s", p, digest[:12])
		}
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err == nil {
			lastErr = nil
			break
		}
		lastErr = err
	}
	if lastErr != nil || len(peers) == 0 {
		return nil, st, fmt.Errorf("no peer served manifest %s: %v", digest[:12], lastErr)
	}
	if m.Name == "" || strings.ContainsAny(m.Name, "/\\") || m.Name == "." || m.Name == ".." {
		return nil, st, fmt.Errorf("manifest %s names an unsafe directory %q", digest[:12], m.Name)
	}
	final := filepath.Join(parent, m.Name)
	tmp := final + ".fetch"
	os.RemoveAll(tmp)
	for _, file := range m.Files {
		if filepath.IsAbs(file.Path) || strings.HasPrefix(filepath.Clean(file.Path), "..") {
			return nil, st, fmt.Errorf("manifest %s names an unsafe path %q", digest[:12], file.Path)
		}
		path := filepath.Join(tmp, file.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, st, err
		}
		out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(file.Mode))
		if err != nil {
			return nil, st, err
		}
		off := int64(0)
		for _, c := range file.Chunks {
			st.Chunks++
			if c.Digest == zeroDigest {
				st.Zero++ // a hole: Truncate below gives it its size
				off += c.Size
				continue
			}
			data, ok := local.readLocal(c.Digest)
			if ok {
				st.Local++
			} else {
				var err error
				for _, p := range peers {
					data, err = f.get(ctx, p, "/chunks/"+c.Digest)
					if err == nil && (int64(len(data)) != c.Size || sum(data) != c.Digest) {
						err = fmt.Errorf("chunk %s from %s fails its checksum", c.Digest[:12], p)
					}
					if err == nil {
						break
					}
				}
				if err != nil {
					out.Close()
					return nil, st, fmt.Errorf("cannot fetch %s chunk %s: %w", file.Path, c.Digest[:12], err)
				}
				st.Fetched++
				st.BytesFetched += int64(len(data))
			}
			if _, err := out.WriteAt(data, off); err != nil {
				out.Close()
				return nil, st, err
			}
			off += c.Size
		}
		if err := out.Truncate(file.Size); err != nil {
			out.Close()
			return nil, st, err
		}
		if err := out.Sync(); err != nil {
			out.Close()
			return nil, st, err
		}
		out.Close()
	}
	// Check the assembled files against the manifest before anyone can see them.
	got, err := Build(tmp)
	if err != nil {
		return nil, st, err
	}
	got.Name = m.Name
	if got.Digest() != digest {
		return nil, st, fmt.Errorf("the assembled image does not match manifest %s", digest[:12])
	}
	os.RemoveAll(final)
	if err := os.Rename(tmp, final); err != nil {
		return nil, st, err
	}
	local.Add(final, &m)
	return &m, st, nil
}
