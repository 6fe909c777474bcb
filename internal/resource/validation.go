package resource

import "github.com/meshnames/meshnames/internal/validate"

// Placeholder spec validators; replaced by the full rules.

func (s *MeshSpec) Validate(p validate.Path) validate.Errors                 { return nil }
func (s *ZoneSpec) Validate(p validate.Path) validate.Errors                 { return nil }
func (s *DataplaneSpec) Validate(p validate.Path) validate.Errors            { return nil }
func (s *MeshServiceSpec) Validate(p validate.Path) validate.Errors          { return nil }
func (s *MeshExternalServiceSpec) Validate(p validate.Path) validate.Errors  { return nil }
func (s *MeshMultiZoneServiceSpec) Validate(p validate.Path) validate.Errors { return nil }
func (s *HostnameGeneratorSpec) Validate(p validate.Path) validate.Errors    { return nil }

// Validate checks the whole object: name, mesh, labels and spec.
func Validate(o *Object) validate.Errors {
	var errs validate.Errors
	d, ok := Lookup(o.Kind)
	if !ok {
		errs.Addf("type", "unknown kind %q", o.Kind)
		return errs
	}
	if d.ServiceKind {
		errs.Check("name", validate.DNS1035Label(o.Name))
	} else {
		errs.Check("name", validate.DNS1123Subdomain(o.Name))
	}
	if d.MeshScoped {
		errs.Check("mesh", validate.DNS1123Subdomain(o.Mesh))
	} else if o.Mesh != "" {
		errs.Addf("mesh", "must be empty: %s is not mesh-scoped", o.Kind)
	}
	for k, v := range o.Labels {
		errs.Check(validate.Path("labels").Key(k), validate.LabelKey(k))
		errs.Check(validate.Path("labels").Key(k), validate.LabelValue(v))
	}
	if o.Spec != nil {
		errs.Append(o.Spec.Validate("spec"))
	}
	return errs
}
