// Package dynamic groups what metactl needs to work with resources it knows
// only at run time, by apiVersion and resource name: discovery (resource
// mapping), shared informers started and stopped at run time, ownership
// (claiming children) and the three-way apply. Each lives in its own
// sub-package; this package holds no code.
package dynamic
