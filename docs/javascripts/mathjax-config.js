// MathJax 3 configuration for pymdownx.arithmatex (generic mode: \( \) inline, \[ \] display).
// Loaded before the library (see mkdocs.yml). The library is served by this site: no CDN.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
  startup: {
    // Material's instant navigation swaps the page body without a reload: typeset each new page.
    ready: () => {
      MathJax.startup.defaultReady();
      document$.subscribe(() => {
        MathJax.startup.output.clearCache();
        MathJax.typesetClear();
        MathJax.texReset();
        MathJax.typesetPromise();
      });
    },
  },
};
