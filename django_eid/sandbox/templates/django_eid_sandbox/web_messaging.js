/* django-eid sandbox: iFrame.WebMessaging for the page that embeds the sandbox.
   Follows the sandbox's message at the end of a session, if it comes from the sandbox and
   names a URL of this page's own origin. */
(function () {
  var sandboxOrigin = "{{ sandbox_origin|escapejs }}";
  window.addEventListener("message", function (event) {
    if (event.origin !== sandboxOrigin) { return; }
    var data = event.data || {};
    if (data.type !== "django-eid-sandbox:return" || typeof data.url !== "string") { return; }
    var target;
    try { target = new URL(data.url, window.location.href); } catch (error) { return; }
    if (target.origin !== window.location.origin) { return; }
    window.location.assign(target.href);
  });
})();
