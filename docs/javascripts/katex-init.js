// Render the math that pymdownx.arithmatex (generic mode) leaves in the page:
// <span class="arithmatex">\(...\)</span> inline and <div class="arithmatex">\[...\]</div> display.
// Only those elements are touched, so a "$" in code or prose is never taken for math.
// `document$` is mkdocs-material's page-load observable (it also fires on instant navigation).
(function () {
  "use strict";

  function strip(tex) {
    var t = tex.trim();
    if ((t.startsWith("\\(") && t.endsWith("\\)")) || (t.startsWith("\\[") && t.endsWith("\\]"))) {
      return t.slice(2, -2);
    }
    return t;
  }

  function renderMath(root) {
    if (typeof katex === "undefined") {
      return;
    }
    root.querySelectorAll(".arithmatex").forEach(function (el) {
      if (el.getAttribute("data-katex") === "done") {
        return;
      }
      katex.render(strip(el.textContent), el, {
        displayMode: el.tagName === "DIV",
        throwOnError: false,
      });
      el.setAttribute("data-katex", "done");
    });
  }

  if (typeof document$ !== "undefined") {
    document$.subscribe(function () {
      renderMath(document.body);
    });
  } else {
    document.addEventListener("DOMContentLoaded", function () {
      renderMath(document.body);
    });
  }
})();
