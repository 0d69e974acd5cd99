package dev.spillway.cli;

public class SpillwayCommand {
  public static void main(String[] args) {}
}
