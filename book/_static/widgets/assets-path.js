// Make the embedded widget manager (embed-amd.js) fetch its own assets from the folder
// this script was served from (_static/widgets/), whatever the depth of the page.
//
// embed-amd.js defines named AMD modules ("@jupyter-widgets/base", ...,
// "@jupyter-widgets/html-manager/dist/libembed-amd") and derives the URL of the icon
// fonts it injects through CSS from RequireJS's URL for those module names. Without a
// `paths` entry RequireJS resolves them against the page, e.g.
// experiments/@jupyter-widgets/html-manager/dist/<font>.woff2, which does not exist.
// Mapping the names onto this folder fixes that; modules that are not in the bundle
// still fall back to the CDN through the manager's own loader.
//
// Must be loaded after require.js and before embed-amd.js (see nb_ipywidgets_js in
// _config.yml).
(function () {
  var self = document.currentScript;
  if (!self || !self.src) {
    return;
  }
  var here = new URL("./", self.src).href;
  var dir = here.replace(/\/$/, "");
  window.__jupyter_widgets_assets_path__ = here;
  if (typeof window.requirejs === "function") {
    window.requirejs.config({
      paths: {
        "@jupyter-widgets/base": dir + "/base",
        "@jupyter-widgets/base7": dir + "/base7",
        "@jupyter-widgets/controls": dir + "/controls",
        "@jupyter-widgets/controls7": dir + "/controls7",
        "@jupyter-widgets/html-manager": dir + "/html-manager",
        "@jupyter-widgets/html-manager/dist": dir,
      },
    });
  }
})();
