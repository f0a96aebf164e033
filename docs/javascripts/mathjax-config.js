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
    // (SVG output keeps its font cache per formula, so there is no output cache to clear.)
    ready: () => {
      MathJax.startup.defaultReady();
      document$.subscribe(() => {
        MathJax.typesetClear();
        MathJax.texReset();
        MathJax.typesetPromise();
      });
    },
  },
};
