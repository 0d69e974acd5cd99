package dev.spillway.cli;

import picocli.CommandLine.IVersionProvider;

final class Version implements IVersionProvider {
  @Override
  public String[] getVersion() {
    String v = Version.class.getPackage().getImplementationVersion();
    return new String[] {"spillway " + (v == null ? "(development build)" : v)};
  }
}
