package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
)

// docsPath serves the OpenAPI document rendered as one script-free HTML
// page with an inline style sheet.
const docsPath = "/docs"

// docsStyle is the page's only style sheet; the Content-Security-Policy
// admits it by its hash.
const docsStyle = `body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em;line-height:1.45}` +
	`code,pre{background:#f3f3f3;font-size:.9em}pre{padding:.5em;white-space:pre-wrap;overflow-wrap:anywhere}` +
	`section{border-top:1px solid #ddd;padding:.3em 0}h3 code{background:none}.m{font-weight:bold;text-transform:uppercase}` +
	`li{margin:.15em 0;overflow-wrap:anywhere}`

// docsCSP refuses everything but the page's own style sheet.
var docsCSP = func() string {
	sum := sha256.Sum256([]byte(docsStyle))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

var docsTemplate = template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} API reference</title><style>{{.Style}}</style></head><body>
<h1>{{.Title}} API reference <small>{{.Version}}</small></h1>
<p>{{.Description}}</p>
<p>The machine-readable document is <a href="/openapi.json">/openapi.json</a>; errors are documented at <a href="/problems">/problems</a>.</p>
<nav><h2>Operations</h2><ul>{{range .Tags}}<li><a href="#tag-{{.Anchor}}">{{.Name}}</a><ul>
{{range .Ops}}<li><a href="#{{.Anchor}}"><span class="m">{{.Method}}</span> <code>{{.Path}}</code></a> {{.Summary}}</li>
{{end}}</ul></li>{{end}}</ul></nav>
{{range .Tags}}<h2 id="tag-{{.Anchor}}">{{.Name}}</h2>{{if .Description}}<p>{{.Description}}</p>{{end}}
{{range .Ops}}<section id="{{.Anchor}}"><h3><span class="m">{{.Method}}</span> <code>{{.Path}}</code></h3>
<p><strong>{{.Summary}}</strong></p><p>{{.Description}}</p>
{{if .Params}}<h4>Parameters</h4><ul>{{range .Params}}<li><code>{{.Name}}</code> ({{.In}}, {{if .Required}}required{{else}}optional{{end}}, {{.Type}}){{if .Description}}: {{.Description}}{{end}}</li>
{{end}}</ul>{{end}}
{{with .Body}}<h4>Request body{{if .Required}} (required){{end}}</h4>{{if .Description}}<p>{{.Description}}</p>{{end}}
{{template "media" .}}{{end}}
<h4>Responses</h4>{{range .Responses}}<p><strong>{{.Status}}</strong> {{.Description}}</p>
{{template "media" .}}{{end}}
</section>
{{end}}{{end}}</body></html>
{{define "media"}}{{range .Media}}<p><code>{{.ContentType}}</code>: {{.Schema}}</p>{{range .Examples}}{{if .Title}}<p>Example <em>{{.Title}}</em></p>{{end}}<pre>{{.Text}}</pre>{{end}}{{end}}{{end}}`))

type docsPage struct {
	Title, Version, Description string
	Style                       template.CSS
	Tags                        []*docsTag
}

type docsTag struct {
	Name, Anchor, Description string
	Ops                       []docsOp
}

type docsOp struct {
	Anchor, Method, Path, Summary, Description string
	Tags                                       []string
	Params                                     []docsParam
	Body                                       *docsBody
	Responses                                  []docsBody
}

type docsParam struct {
	Name, In, Type, Description string
	Required                    bool
}

// docsBody is a request body, or a response under its Status.
type docsBody struct {
	Status, Description string
	Required            bool
	Media               []docsMedia
}

type docsMedia struct {
	ContentType, Schema string
	Examples            []docsExample
}

// docsExample is one example; Title names a named example.
type docsExample struct{ Title, Text string }

// renderedDocs is the page of [OpenAPI], rendered by the first call.
var renderedDocs = sync.OnceValues(func() ([]byte, error) { return renderDocs(OpenAPI) })

// renderDocs renders the page of the OpenAPI document doc. It returns an
// error when the document is not JSON or a $ref names nothing in it.
func renderDocs(doc []byte) ([]byte, error) {
	var o oapi
	if err := json.Unmarshal(doc, &o.root); err != nil {
		return nil, fmt.Errorf("api: the OpenAPI document: %w", err)
	}
	var top struct {
		Info struct{ Title, Version, Description string }
		Tags []struct{ Name, Description string }
		// Paths stays raw: its keys are read in document order.
		Paths json.RawMessage
	}
	if err := json.Unmarshal(doc, &top); err != nil {
		return nil, err
	}
	page := docsPage{Title: top.Info.Title, Version: top.Info.Version, Description: top.Info.Description, Style: docsStyle}
	tags := map[string]*docsTag{}
	tagOf := func(name, description string) *docsTag {
		if t, ok := tags[name]; ok {
			return t
		}
		t := &docsTag{Name: name, Anchor: strings.ReplaceAll(name, " ", "-"), Description: description}
		tags[name] = t
		page.Tags = append(page.Tags, t)
		return t
	}
	for _, t := range top.Tags {
		tagOf(t.Name, t.Description)
	}
	paths, err := orderedKeys(top.Paths)
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		ops, err := o.operations(p.key, p.value)
		if err != nil {
			return nil, fmt.Errorf("path %s: %w", p.key, err)
		}
		for _, op := range ops {
			tag := "other"
			if len(op.Tags) > 0 {
				tag = op.Tags[0]
			}
			t := tagOf(tag, "")
			t.Ops = append(t.Ops, op)
		}
	}
	var b bytes.Buffer
	if err := docsTemplate.Execute(&b, page); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// oapi resolves the document's local $refs.
type oapi struct{ root map[string]any }

// deref decodes raw into v, first following raw's $ref when it has one.
func (o *oapi) deref(raw json.RawMessage, v any) error {
	var ref struct {
		Ref string `json:"$ref"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		return err
	}
	if ref.Ref == "" {
		return json.Unmarshal(raw, v)
	}
	var at any = o.root
	for _, seg := range strings.Split(strings.TrimPrefix(ref.Ref, "#/"), "/") {
		m, ok := at.(map[string]any)
		if !ok || m[seg] == nil {
			return fmt.Errorf("$ref %s names nothing", ref.Ref)
		}
		at = m[seg]
	}
	b, err := json.Marshal(at)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

type keyValue struct {
	key   string
	value json.RawMessage
}

// orderedKeys returns the members of the JSON object raw in document
// order, which a map would lose; none when raw is empty.
func orderedKeys(raw json.RawMessage) ([]keyValue, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("api: not a JSON object")
	}
	var kvs []keyValue
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		kvs = append(kvs, keyValue{t.(string), v})
	}
	return kvs, nil
}

var docsMethods = []string{"get", "head", "post", "put", "patch", "delete", "options", "trace"}

// operations renders the operations of one path item, in document order.
func (o *oapi) operations(path string, item json.RawMessage) ([]docsOp, error) {
	members, err := orderedKeys(item)
	if err != nil {
		return nil, err
	}
	var shared struct{ Parameters []json.RawMessage }
	if err := json.Unmarshal(item, &shared); err != nil {
		return nil, err
	}
	var ops []docsOp
	for _, m := range members {
		if !slices.Contains(docsMethods, m.key) {
			continue
		}
		var raw struct {
			OperationID          string `json:"operationId"`
			Summary, Description string
			Tags                 []string
			Parameters           []json.RawMessage
			RequestBody          json.RawMessage
			Responses            json.RawMessage
		}
		if err := json.Unmarshal(m.value, &raw); err != nil {
			return nil, err
		}
		op := docsOp{Anchor: raw.OperationID, Method: m.key, Path: path, Summary: raw.Summary,
			Description: raw.Description, Tags: raw.Tags}
		if op.Anchor == "" {
			op.Anchor = m.key + strings.NewReplacer("/", "-", "{", "", "}", "").Replace(path)
		}
		for _, p := range append(slices.Clone(shared.Parameters), raw.Parameters...) {
			var param struct {
				Name, In, Description string
				Required              bool
				Schema                json.RawMessage
			}
			if err := o.deref(p, &param); err != nil {
				return nil, err
			}
			op.Params = append(op.Params, docsParam{Name: param.Name, In: param.In, Required: param.Required,
				Description: param.Description, Type: schemaSummary(param.Schema)})
		}
		if len(raw.RequestBody) > 0 {
			body, err := o.body("", raw.RequestBody)
			if err != nil {
				return nil, err
			}
			op.Body = &body
		}
		responses, err := orderedKeys(raw.Responses)
		if err != nil {
			return nil, fmt.Errorf("%s responses: %w", m.key, err)
		}
		for _, r := range responses {
			resp, err := o.body(r.key, r.value)
			if err != nil {
				return nil, err
			}
			op.Responses = append(op.Responses, resp)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// body renders a request body, or the response of status, following its
// $ref.
func (o *oapi) body(status string, raw json.RawMessage) (docsBody, error) {
	var b struct {
		Description string
		Required    bool
		Content     json.RawMessage
	}
	if err := o.deref(raw, &b); err != nil {
		return docsBody{}, err
	}
	media, err := docsContent(b.Content)
	return docsBody{Status: status, Description: b.Description, Required: b.Required, Media: media}, err
}

// docsContent renders a content map: each media type, its schema's summary
// and its examples as indented JSON (a string example as it is).
func docsContent(content json.RawMessage) ([]docsMedia, error) {
	types, err := orderedKeys(content)
	if err != nil {
		return nil, err
	}
	var media []docsMedia
	for _, t := range types {
		var m struct{ Schema, Example, Examples json.RawMessage }
		if err := json.Unmarshal(t.value, &m); err != nil {
			return nil, err
		}
		d := docsMedia{ContentType: t.key, Schema: schemaSummary(m.Schema)}
		if len(m.Example) > 0 {
			d.Examples = append(d.Examples, docsExample{Text: exampleText(m.Example)})
		}
		named, err := orderedKeys(m.Examples)
		if err != nil {
			return nil, err
		}
		for _, e := range named {
			var ex struct {
				Summary string
				Value   json.RawMessage
			}
			if err := json.Unmarshal(e.value, &ex); err != nil {
				return nil, err
			}
			d.Examples = append(d.Examples, docsExample{Title: strings.TrimSuffix(e.key+": "+ex.Summary, ": "), Text: exampleText(ex.Value)})
		}
		media = append(media, d)
	}
	return media, nil
}

func exampleText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// schemaSummary names a schema in a few words: its component's name, or
// its type and format, "array of" its items.
func schemaSummary(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s struct {
		Ref    string `json:"$ref"`
		Type   any
		Format string
		Items  json.RawMessage
		Enum   []any
	}
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	if s.Ref != "" {
		return s.Ref[strings.LastIndex(s.Ref, "/")+1:]
	}
	out := fmt.Sprint(s.Type)
	if types, ok := s.Type.([]any); ok {
		parts := make([]string, len(types))
		for i, t := range types {
			parts[i] = fmt.Sprint(t)
		}
		out = strings.Join(parts, " or ")
	}
	if s.Type == nil {
		out = "any"
	}
	if s.Format != "" {
		out += " (" + s.Format + ")"
	}
	if len(s.Enum) > 0 {
		out += fmt.Sprintf(", one of %v", s.Enum)
	}
	if len(s.Items) > 0 {
		out += " of " + schemaSummary(s.Items)
	}
	return out
}

// serveDocs serves the page rendered by New.
func (s *Server) serveDocs(c echo.Context) error {
	h := c.Response().Header()
	h.Set("Content-Security-Policy", docsCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	return c.Blob(http.StatusOK, echo.MIMETextHTMLCharsetUTF8, s.docs)
}
