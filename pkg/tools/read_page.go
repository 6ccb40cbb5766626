package tools

import (
	"bytes"
	"context"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// ReadPageName is the read_page tool's name.
const ReadPageName = "read_page"

// DefaultPageChars caps read_page's text.
const DefaultPageChars = 20000

type pageIn struct {
	URL string `json:"url" desc:"Absolute http or https URL of the page." jsonschema:"minLength=1,maxLength=8192"`
}

// ReadPage returns the read_page tool under policy p: it fetches a page
// and returns its readable text (the title, then headings, paragraphs,
// list items and table cells, without scripts, styles or markup), capped
// at DefaultPageChars characters. Plain text pages are returned as they
// are; other content types are an error result.
func ReadPage(p HTTPPolicy) *loop.Tool {
	p = p.WithDefaults()
	c := p.client()
	return loop.NewTool(ReadPageName,
		"Fetch a web page and return its readable text (capped). Only the hosts this agent is allowed to reach work.",
		func(ctx context.Context, _ *loop.RunContext, in pageIn) (string, error) {
			resp, body, truncated, err := fetch(ctx, c, p, http.MethodGet, in.URL, map[string]string{"Accept": "text/html, text/plain;q=0.9"}, "")
			if err != nil {
				return "", err
			}
			if resp.StatusCode >= 400 {
				return "", &loop.ToolError{Message: fmt.Sprintf("%s answered HTTP %d %s", resp.Request.URL.Host, resp.StatusCode, http.StatusText(resp.StatusCode))}
			}
			mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
			var text string
			switch {
			case mt == "text/html" || mt == "application/xhtml+xml" || mt == "":
				text = PageText(body)
			case strings.HasPrefix(mt, "text/"):
				text = strings.TrimSpace(string(body))
			default:
				return "", &loop.ToolError{Message: fmt.Sprintf("%s is %s, not a page: use http_request for other content", in.URL, mt)}
			}
			r := []rune(text)
			if len(r) > DefaultPageChars {
				text, truncated = string(r[:DefaultPageChars]), true
			}
			if truncated {
				text += "\n[page truncated]"
			}
			return text, nil
		},
		loop.WithMaxOutputChars(-1),
	)
}

// skipped are elements whose content is never readable text.
var skipped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Svg: true, atom.Iframe: true, atom.Head: true, atom.Nav: true, atom.Form: true,
}

// blocks end a line of text.
var blocks = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Br: true, atom.Li: true, atom.Tr: true, atom.Td: true, atom.Th: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Section: true, atom.Article: true, atom.Header: true, atom.Footer: true, atom.Pre: true,
	atom.Blockquote: true, atom.Ul: true, atom.Ol: true, atom.Table: true, atom.Main: true, atom.Hr: true,
}

// PageText extracts the readable text of an HTML document: its title on
// the first line, then one line per block, white space collapsed.
func PageText(doc []byte) string {
	root, err := html.Parse(bytes.NewReader(doc))
	if err != nil {
		return ""
	}
	var (
		title string
		lines []string
		cur   strings.Builder
	)
	flush := func() {
		if s := strings.Join(strings.Fields(cur.String()), " "); s != "" {
			lines = append(lines, s)
		}
		cur.Reset()
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			if skipped[n.DataAtom] {
				return
			}
			if blocks[n.DataAtom] {
				flush()
			}
		}
		if n.Type == html.TextNode {
			cur.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
		if n.Type == html.ElementNode && blocks[n.DataAtom] {
			flush()
		}
	}
	var findTitle func(n *html.Node)
	findTitle = func(n *html.Node) {
		if title != "" {
			return
		}
		if n.Type == html.ElementNode && n.DataAtom == atom.Title && n.FirstChild != nil {
			title = strings.Join(strings.Fields(n.FirstChild.Data), " ")
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			findTitle(c)
		}
	}
	findTitle(root)
	walk(root)
	flush()
	if title != "" && (len(lines) == 0 || lines[0] != title) {
		lines = append([]string{title}, lines...)
	}
	return strings.Join(lines, "\n")
}
