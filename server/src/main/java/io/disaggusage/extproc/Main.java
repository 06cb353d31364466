package io.disaggusage.extproc;
public final class Main { public static void main(String[] a) {} }
