// MathJax for pymdownx.arithmatex (generic mode): \( \) inline, \[ \] display; loaded by the
// browser (mkdocs.yml, extra_javascript), nothing fetched at build time.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex"
  }
};

document$.subscribe(() => {
  MathJax.typesetPromise()
})
