package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code bin/spillway} run from a copy in a directory of its own, with a stand-in {@code java} that
 * answers {@code -version} as told and otherwise prints the arguments it was given, and a stand-in
 * {@code mvn} on the path, so the launcher's choices are seen without building or starting
 * anything.
 */
class LauncherScriptTest {
  @TempDir Path dir;
  private Path app;
  private Path javaHome;
  private Path tools;

  @BeforeEach
  void copyTheLauncher() throws IOException {
    app = dir.resolve("app");
    Files.createDirectories(app.resolve("bin"));
    Path script = app.resolve("bin/spillway");
    Files.copy(Path.of("bin/spillway"), script);
    executable(script);
    Files.createDirectories(app.resolve("src/main"));
    Files.createDirectories(app.resolve("schemas"));
    Files.writeString(app.resolve("pom.xml"), "<project/>");
    Files.createDirectories(app.resolve("target/lib"));
    Files.writeString(app.resolve("target/spillway.jar"), "built");
    javaHome = dir.resolve("jdk");
    tools = dir.resolve("tools");
    Files.createDirectories(tools);
    fakeJava("17.0.9");
  }

  @Test
  void should_refuse_a_java_older_than_17_in_one_sentence() throws Exception {
    fakeJava("11.0.2");
    Run run = launch(app.resolve("bin/spillway"), Map.of(), "status");

    assertThat(run.exit).isEqualTo(1);
    assertThat(run.out.strip())
        .isEqualTo(
            "Spillway needs Java 17 or later; "
                + javaHome.resolve("bin/java")
                + " is Java 11.0.2 (set JAVA_HOME to a newer one).");
  }

  @Test
  void should_read_a_java_8_version_by_its_second_number() throws Exception {
    fakeJava("1.8.0_392");
    Run run = launch(app.resolve("bin/spillway"), Map.of(), "status");

    assertThat(run.exit).isEqualTo(1);
    assertThat(run.out).contains("is Java 1.8.0 (");
  }

  @Test
  void should_say_so_when_java_home_has_no_java() throws Exception {
    Files.delete(javaHome.resolve("bin/java"));
    Run run = launch(app.resolve("bin/spillway"), Map.of(), "status");

    assertThat(run.exit).isEqualTo(1);
    assertThat(run.out.strip())
        .isEqualTo(
            "JAVA_HOME is "
                + javaHome
                + ", which has no bin/java; set it to a Java 17 or later, or unset it.");
  }

  @Test
  void should_run_the_jar_beside_the_script_through_a_link_with_options_never_globbed()
      throws Exception {
    Path links = Files.createDirectories(dir.resolve("links"));
    Path link = Files.createSymbolicLink(links.resolve("spillway"), Path.of("../app/bin/spillway"));
    // A file the option matches as a glob, in the directory the launcher runs in.
    Files.writeString(dir.resolve("-Xlog:gc:file=gc.log"), "");

    Run run =
        launch(link, Map.of("SPILLWAY_JAVA_OPTS", "-Xmx1g  -Xlog:gc*:file=gc*.log"), "status");

    assertThat(run.exit).isZero();
    assertThat(run.out.lines())
        .containsExactly(
            "-Xmx1g",
            "-Xlog:gc*:file=gc*.log",
            "-cp",
            app.toRealPath().resolve("target/spillway.jar").toString(),
            "dev.spillway.cli.SpillwayCommand",
            "status");
  }

  @Test
  void should_find_its_jar_run_by_a_relative_path_with_cdpath_exported() throws Exception {
    // cd through a CDPATH entry prints the directory it reached, which the launcher must not read.
    Run run = launch(Path.of("app/bin/spillway"), Map.of("CDPATH", ".:" + dir), "status");

    assertThat(run.exit).isZero();
    assertThat(run.out.lines())
        .containsExactly(
            "-cp",
            app.toRealPath().resolve("target/spillway.jar").toString(),
            "dev.spillway.cli.SpillwayCommand",
            "status");
  }

  @Test
  void should_add_spillway_classpath_after_the_jar_unglobbed() throws Exception {
    Files.createDirectories(dir.resolve("lib"));
    Files.writeString(dir.resolve("lib/a.jar"), "");

    Run run =
        launch(
            app.resolve("bin/spillway"),
            Map.of("SPILLWAY_CLASSPATH", "/opt/crm/crm.jar:lib/*"),
            "run");

    assertThat(run.exit).isZero();
    assertThat(run.out.lines())
        .containsExactly(
            "-cp",
            app.toRealPath().resolve("target/spillway.jar") + ":/opt/crm/crm.jar:lib/*",
            "dev.spillway.cli.SpillwayCommand",
            "run");
  }

  @Test
  void should_build_a_stale_jar_keeping_the_running_one_aside() throws Exception {
    staleJar();
    fakeMaven("printf new > target/spillway.jar");

    Run run = launch(app.resolve("bin/spillway"), Map.of(), "status");

    assertThat(run.exit).isZero();
    assertThat(run.out).contains("Building Spillway");
    assertThat(app.resolve("target/spillway.jar")).hasContent("new");
    // Moved, not written over: a Spillway started from it still reads the file it opened.
    assertThat(app.resolve("target/spillway.jar.previous")).hasContent("built");
  }

  @Test
  void should_keep_the_old_jar_when_the_build_fails() throws Exception {
    staleJar();
    fakeMaven("exit 1");

    Run run = launch(app.resolve("bin/spillway"), Map.of(), "status");

    assertThat(run.exit).isEqualTo(1);
    assertThat(run.out)
        .contains("The build failed; run 'mvn -DskipTests package' in " + app.toRealPath());
    assertThat(app.resolve("target/spillway.jar")).hasContent("built");
  }

  private void staleJar() throws IOException {
    Files.setLastModifiedTime(
        app.resolve("target/spillway.jar"), FileTime.from(Instant.now().minusSeconds(3600)));
  }

  /** A {@code mvn} that runs the given shell line in the directory it is started in. */
  private void fakeMaven(String line) throws IOException {
    Path mvn = tools.resolve("mvn");
    Files.writeString(mvn, "#!/bin/sh\n" + line + "\n");
    executable(mvn);
  }

  private void fakeJava(String version) throws IOException {
    Path java = javaHome.resolve("bin/java");
    Files.createDirectories(java.getParent());
    Files.writeString(
        java,
        "#!/bin/sh\n"
            + "if [ \"$1\" = -version ]; then\n"
            + "  echo 'openjdk version \""
            + version
            + "\" 2024-01-16' >&2\n"
            + "  exit 0\n"
            + "fi\n"
            + "for a in \"$@\"; do printf '%s\\n' \"$a\"; done\n");
    executable(java);
  }

  private static void executable(Path file) throws IOException {
    Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rwxr-xr-x"));
  }

  private record Run(int exit, String out) {}

  private Run launch(Path script, Map<String, String> env, String... args) throws Exception {
    ProcessBuilder pb =
        new ProcessBuilder(
                concat(List.of("bash", script.toString()), List.of(args)).toArray(String[]::new))
            .directory(dir.toFile())
            .redirectErrorStream(true);
    pb.environment().put("JAVA_HOME", javaHome.toString());
    pb.environment().put("PATH", tools + ":/usr/bin:/bin");
    pb.environment().remove("SPILLWAY_JAVA_OPTS");
    pb.environment().putAll(env);
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
    return new Run(p.exitValue(), out);
  }

  private static List<String> concat(List<String> a, List<String> b) {
    return java.util.stream.Stream.concat(a.stream(), b.stream()).toList();
  }
}
