// Package hutchd is a small client of hutchd's HTTP API (docs/api.md) over its unix socket:
// what the node agent needs to make Boxes real on its node.
package hutchd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

type Client struct {
	Socket string
	http   *http.Client
}

func New(socket string) *Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	return &Client{Socket: socket, http: &http.Client{Transport: tr}}
}

// Transport is the socket's HTTP transport, for a reverse proxy in front of hutchd.
func (c *Client) Transport() http.RoundTripper { return c.http.Transport }

// Error is hutchd's error body: {"error": {"code", "message"}} with the HTTP status.
type Error struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("hutchd: %s (%s, HTTP %d)", e.Message, e.Code, e.Status)
}

func IsNotFound(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Code == "not_found"
}

type Box struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Template  string `json:"template"`
	CPUs      int64  `json:"cpus"`
	MemoryMiB int64  `json:"memory_mib"`
	State     string `json:"state"`
	Reason    string `json:"reason"`
	Boot      string `json:"boot"`
}

type Template struct {
	Name     string `json:"name"`
	Dir      string `json:"dir"`
	ImageKey string `json:"image_key"`
}

type Info struct {
	Version string `json:"version"`
	Backend string `json:"backend"`
	Accel   struct {
		Name string `json:"name"`
	} `json:"accel"`
}

func (c *Client) do(ctx context.Context, method, path string, body, out any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://hutchd"+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("hutchd at %s does not answer: %w", c.Socket, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error Error `json:"error"`
		}
		if json.Unmarshal(data, &e) != nil || e.Error.Code == "" {
			return &Error{Status: resp.StatusCode, Code: "internal", Message: string(data)}
		}
		e.Error.Status = resp.StatusCode
		return &e.Error
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (c *Client) Info(ctx context.Context) (*Info, error) {
	var i Info
	return &i, c.do(ctx, "GET", "/v1/info", nil, &i, 5*time.Second)
}

type CreateRequest struct {
	Name      string `json:"name"`
	Template  string `json:"template,omitempty"`
	CPUs      int64  `json:"cpus,omitempty"`
	MemoryMiB int64  `json:"memory_mib,omitempty"`
	DiskMiB   int64  `json:"disk_mib,omitempty"`
}

// Slow operations (a create may build a template snapshot under TCG) get long deadlines.
const slow = 10 * time.Minute

func (c *Client) Create(ctx context.Context, r CreateRequest) (*Box, error) {
	var b Box
	return &b, c.do(ctx, "POST", "/v1/boxes", r, &b, slow)
}

func (c *Client) Get(ctx context.Context, name string) (*Box, error) {
	var b Box
	return &b, c.do(ctx, "GET", "/v1/boxes/"+url.PathEscape(name), nil, &b, 30*time.Second)
}

func (c *Client) Start(ctx context.Context, name string) (*Box, error) {
	var b Box
	return &b, c.do(ctx, "POST", "/v1/boxes/"+url.PathEscape(name)+"/start", nil, &b, slow)
}

func (c *Client) Stop(ctx context.Context, name string) (*Box, error) {
	var b Box
	return &b, c.do(ctx, "POST", "/v1/boxes/"+url.PathEscape(name)+"/stop", nil, &b, slow)
}

func (c *Client) Remove(ctx context.Context, name string) error {
	return c.do(ctx, "DELETE", "/v1/boxes/"+url.PathEscape(name)+"?force=true", nil, nil, slow)
}

func (c *Client) Fork(ctx context.Context, parent, child string) (*Box, error) {
	var out struct {
		Boxes []Box `json:"boxes"`
	}
	if err := c.do(ctx, "POST", "/v1/boxes/"+url.PathEscape(parent)+"/fork", map[string]any{"names": []string{child}}, &out, slow); err != nil {
		return nil, err
	}
	if len(out.Boxes) != 1 {
		return nil, fmt.Errorf("hutchd forked %d boxes, not 1", len(out.Boxes))
	}
	return &out.Boxes[0], nil
}

func (c *Client) Templates(ctx context.Context) ([]Template, error) {
	var out struct {
		Templates []Template `json:"templates"`
	}
	return out.Templates, c.do(ctx, "GET", "/v1/templates", nil, &out, 30*time.Second)
}

// BuildTemplate asks hutchd for template name from its recipe; the image cache answers at once
// when it holds the image (built here or fetched from a peer).
func (c *Client) BuildTemplate(ctx context.Context, name string) (*Template, error) {
	var t Template
	return &t, c.do(ctx, "POST", "/v1/templates", map[string]any{"name": name}, &t, 30*time.Minute)
}
