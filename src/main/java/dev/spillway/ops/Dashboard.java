package dev.spillway.ops;

import java.time.Instant;

/**
 * The HTTP port's page for a browser: the status report as {@code status} prints it, read again
 * every few seconds, with a banner when a part of the process has failed, and links to the
 * endpoints for machines.
 */
final class Dashboard {
  /** How often the page reads the status again. */
  static final int REFRESH_SECONDS = 5;

  private Dashboard() {}

  static String page(StatusReport report, Instant now) {
    StringBuilder b = new StringBuilder();
    b.append("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
        .append("<meta http-equiv=\"refresh\" content=\"")
        .append(REFRESH_SECONDS)
        .append("\">\n<title>Spillway</title>\n<style>\n")
        .append("body { font-family: system-ui, sans-serif; margin: 1.5rem; }\n")
        .append("pre { font-size: 13px; background: #f6f8fa; padding: 1rem; overflow-x: auto; }\n")
        .append(".failed { background: #b42318; color: #fff; padding: .5rem 1rem; }\n")
        .append("</style>\n</head>\n<body>\n<h1>Spillway</h1>\n");
    if (report.failure() != null) {
      b.append("<p class=\"failed\">FAILED: ").append(escape(report.failure())).append("</p>\n");
    }
    b.append("<p>Shown at ")
        .append(escape(now.truncatedTo(java.time.temporal.ChronoUnit.SECONDS).toString()))
        .append("; the page reloads every ")
        .append(REFRESH_SECONDS)
        .append(" s. For machines: <a href=\"/metrics\">/metrics</a>,")
        .append(" <a href=\"/api/status\">/api/status</a>, <a href=\"/livez\">/livez</a>.</p>\n")
        .append("<pre>")
        .append(escape(StatusText.render(report, now)))
        .append("</pre>\n</body>\n</html>\n");
    return b.toString();
  }

  static String escape(String text) {
    StringBuilder b = new StringBuilder(text.length());
    for (char c : text.toCharArray()) {
      switch (c) {
        case '&' -> b.append("&amp;");
        case '<' -> b.append("&lt;");
        case '>' -> b.append("&gt;");
        case '"' -> b.append("&quot;");
        default -> b.append(c);
      }
    }
    return b.toString();
  }
}
